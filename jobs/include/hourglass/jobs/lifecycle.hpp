// An async job's life as one rule: (state, event, facts) -> (next state,
// what to do). The memory store's table (server/src/stores/memory_jobs.cpp) and the
// fleet's scripts (fleet/lua/lib/family.lua and the scripts that splice it
// in) implement these transitions; this is the rule they are held to, in
// the shape of the consumer's held entry (fleet/src/held_entry.hpp) and the
// daemon's sync call. Pure: no store, no clock, no threads
// (tests/jobs/lifecycle_test.cpp).
#pragma once

#include <cstdint>
#include <string_view>

#include "hourglass/jobs/job_state.hpp"
#include "hourglass/outcome.hpp"

namespace hourglass::jobs {

enum class job_event : std::uint8_t {
  started,             // a worker begins its attempt (or its run resumed after a wait)
  ended,               // its attempt ended with its outcome (facts.outcome)
  ended_retryable,     // its attempt failed and its retry rule gave a due time inside the deadline
  due,                 // its due time came: a delay, or a retry's backoff
  waits_for_children,  // its run ended waiting for its children (handler_result::wait_for)
  waits_for_signal,    // its run ended waiting for a person's signal
  child_ended,         // one of its children has its outcome (facts.wait_over: its rule is met now)
  woke,                // its wait's own time came: the deadline less its keep
  signalled,           // the signal it waits for came, within the wait's limit
  wait_limit,          // a person's wait ran out of its limit
  cancel_asked,        // a DELETE (cause requested) or its parent's cancel (cause parent)
  dead_lettered,       // fleet: its workers kept dying (max deliveries)
  replayed,            // fleet: an operator replayed it from the dead letter
};

// What the rule needs beyond the state and the event.
struct job_facts {
  bool cancel_requested = false;     // a cancel reached it while it ran
  bool waits_for_signal = false;     // waiting: for a person, not its children
  bool wait_over = false;            // waiting for children: the rule is met by the outcomes so far
  bool wake_due = false;             // waits_for_children: its wake time has come already
  outcome ended_with = outcome::ok;  // ended: the attempt's outcome
};

// What the store does besides moving the state. Several at once.
enum job_action : std::uint16_t {
  no_action = 0,
  count_attempt = 1 << 0,         // started: attempt + 1 (not on a resumed run)
  run_it = 1 << 1,                // put it where a worker takes it (queue, stream)
  schedule_it = 1 << 2,           // into the delayed set / a timer at its due time
  unschedule_it = 1 << 3,         // out of the delayed set / its timer cancelled
  stop_run = 1 << 4,              // its worker stops it (running: marked; its outcome comes from the run)
  record_outcome = 1 << 5,        // its outcome written: payload dropped, TTL starts
  count_down_parent = 1 << 6,     // its parent's wait counts it (once per child)
  cancel_children = 1 << 7,       // its unfinished descendants cancelled, cause parent
  wake_count = 1 << 8,            // wakes + 1, woke_by set
  keep_children_listed = 1 << 9,  // its children stay listed however long it waits
};

constexpr job_action operator|(job_action a, job_action b) noexcept {
  return static_cast<job_action>(static_cast<std::uint16_t>(a) | static_cast<std::uint16_t>(b));
}
constexpr bool has(job_action set, job_action a) noexcept {
  return (static_cast<std::uint16_t>(set) & static_cast<std::uint16_t>(a)) != 0;
}

// Why a resumed run woke (request_view::woke_by).
enum class woke_by : std::uint8_t { none, children, deadline, signal };

// As the job object spells it ("" none: its attempt's first run).
constexpr std::string_view to_string(woke_by w) noexcept {
  switch (w) {
    case woke_by::none: return "";
    case woke_by::children: return "children";
    case woke_by::deadline: return "deadline";
    case woke_by::signal: return "signal";
  }
  return "";
}

struct job_step {
  job_state next;
  job_action actions = no_action;
  woke_by woke = woke_by::none;
  bool applies = true;  // false: the event does not apply in this state; nothing changes
};

// The rule. An event that does not apply (a late timer, a second finish, a
// signal for a job not waiting for it) changes nothing: applies false.
constexpr job_step on_job_event(job_state s, job_event e, const job_facts& f) noexcept {
  using st = job_state;
  using ev = job_event;
  const job_step ignore{s, no_action, woke_by::none, false};
  // Every final outcome: written, its parent counted down, its children (a
  // parent's unfinished ones, when its own outcome comes first) left to run
  // unless it was cancelled.
  const auto final_as = [](job_state to, job_action more = no_action) {
    return job_step{to, record_outcome | count_down_parent | more};
  };
  switch (e) {
    case ev::started:
      if (s != st::queued) return ignore;
      return {st::running, count_attempt};  // a resumed run: the store keeps its attempt (woke_by set)
    case ev::ended:
      if (is_final(s)) return ignore;
      return final_as(final_state(f.ended_with));
    case ev::ended_retryable:
      if (s != st::running) return ignore;
      // A cancel that reached it while it ran ends it cancelled, never retried.
      if (f.cancel_requested) return final_as(st::cancelled);
      return {st::scheduled, schedule_it};
    case ev::due:
      if (s != st::scheduled) return ignore;
      return {st::queued, run_it};
    case ev::waits_for_children:
      if (s != st::running) return ignore;
      // Its cancel walked its family when it reached the run.
      if (f.cancel_requested) return final_as(st::cancelled);
      // Met already (or its wake time has come): back to run at once; the
      // children still unfinished are nobody's to wait for.
      if (f.wait_over || f.wake_due) {
        return {st::queued, run_it | wake_count | cancel_children, f.wait_over ? woke_by::children : woke_by::deadline};
      }
      return {st::waiting, schedule_it | keep_children_listed};
    case ev::waits_for_signal:
      if (s != st::running) return ignore;
      if (f.cancel_requested) return final_as(st::cancelled);
      return {st::waiting, schedule_it | keep_children_listed};  // scheduled at its limit
    case ev::child_ended:
      if (s != st::waiting || f.waits_for_signal || !f.wait_over) return ignore;
      return {st::queued, run_it | unschedule_it | wake_count | cancel_children, woke_by::children};
    case ev::woke:
      if (s != st::waiting || f.waits_for_signal) return ignore;
      return {st::queued, run_it | wake_count | cancel_children, f.wait_over ? woke_by::children : woke_by::deadline};
    case ev::signalled:
      if (s != st::waiting || !f.waits_for_signal) return ignore;
      return {st::queued, run_it | unschedule_it | wake_count, woke_by::signal};
    case ev::wait_limit:
      if (s != st::waiting || !f.waits_for_signal) return ignore;
      return final_as(st::deadline_exceeded);
    case ev::cancel_asked:
      switch (s) {
        case st::running: return {st::running, stop_run | cancel_children};
        case st::queued: return final_as(st::cancelled, cancel_children);
        case st::scheduled:
        case st::waiting: return final_as(st::cancelled, unschedule_it | cancel_children);
        default: return ignore;
      }
    case ev::dead_lettered:
      if (s != st::queued && s != st::running) return ignore;
      return {st::dead, count_down_parent};  // kept whole, payload and all, for a replay
    case ev::replayed:
      if (s != st::dead) return ignore;
      return {st::queued, run_it};  // its parent is not counted down again (once per child)
  }
  return ignore;
}

}  // namespace hourglass::jobs
