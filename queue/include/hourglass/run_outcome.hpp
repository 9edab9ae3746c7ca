// The end-of-run rule: how a job that was started ends, as a pure function
// of how its function ended, what its context says and whether the deadline
// passed. Used by the executor and by fan-out, tested as a table.
#pragma once

#include <cstdint>

#include "hourglass/outcome.hpp"

namespace hourglass {

enum class run_ending : std::uint8_t {
  returned,  // the function returned a value
  stopped,   // it threw stopped_error (context::check(), or its own status)
  threw,     // it threw anything else
};

struct run_facts {
  run_ending how = run_ending::returned;
  status thrown = status::ok();   // the stopped_error's status (how == stopped)
  status context = status::ok();  // the job context's stop status when the function ended
  bool past_deadline = false;     // it ended after its deadline (the timer may not have fired)
};

struct run_verdict {
  status st;
  bool completed_late = false;  // a result was produced after the stop or the deadline: wasted work

  friend constexpr bool operator==(const run_verdict&, const run_verdict&) = default;
};

// - A stop seen by the context wins over what the function did, except that
//   a function reporting it never really started (deadline_exceeded/queue, as
//   the daemon does for a job whose caller was already answered) keeps that.
// - A result returned after the context stopped is discarded; if the stop was
//   the deadline it was completed late. With no stop seen but the deadline
//   passed (policy fifo, or a timer not fired yet) it is deadline_exceeded/run
//   and completed late.
// - A function that threw while nothing stopped it failed (error); one that
//   threw past its deadline ran out of time (deadline_exceeded/run, not late:
//   it produced nothing).
// - deadline_exceeded keeps the stages queue, downstream and idle; every
//   other stage becomes run (the job was started).
constexpr run_verdict run_outcome(const run_facts& f) noexcept {
  run_verdict v;
  switch (f.how) {
    case run_ending::stopped: {
      const bool never_started = f.thrown.code == outcome::deadline_exceeded && f.thrown.stage == expiry_stage::queue;
      v.st = f.context.is_ok() || never_started ? f.thrown : f.context;
      break;
    }
    case run_ending::threw:
      v.st = !f.context.is_ok() ? f.context : f.past_deadline ? status::expired(expiry_stage::run) : status::error();
      break;
    case run_ending::returned:
      if (!f.context.is_ok()) {
        v.st = f.context;
        v.completed_late = f.context.code == outcome::deadline_exceeded;
      } else if (f.past_deadline) {
        v.st = status::expired(expiry_stage::run);
        v.completed_late = true;
      } else {
        v.st = status::ok();
      }
      break;
  }
  if (v.st.code == outcome::deadline_exceeded && v.st.stage != expiry_stage::downstream &&
      v.st.stage != expiry_stage::queue && v.st.stage != expiry_stage::idle) {
    v.st.stage = expiry_stage::run;
  }
  return v;
}

}  // namespace hourglass
