// An async job's life as one rule (hourglass/jobs/lifecycle.hpp): a table
// of (state, event, facts) -> (next, actions), and every event against
// every state it must leave alone.
#include "hourglass/jobs/lifecycle.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hourglass::jobs::lifecycle_testing {
namespace {

using st = job_state;
using ev = job_event;

std::string name(job_event e) {
  static constexpr const char* names[] = {
      "started",     "ended", "ended_retryable", "due",        "waits_for_children", "waits_for_signal",
      "child_ended", "woke",  "signalled",       "wait_limit", "cancel_asked",       "dead_lettered",
      "replayed"};
  return names[static_cast<int>(e)];
}

struct row {
  job_state from;
  job_event e;
  job_facts facts;
  job_state to;
  job_action actions;
  woke_by woke = woke_by::none;
};

TEST(Lifecycle, EachTransitionAndWhatItDoes) {
  const job_facts none{};
  const job_facts marked{.cancel_requested = true};
  const job_facts over{.wait_over = true};
  const job_facts wake_due{.wake_due = true};
  const job_facts for_signal{.waits_for_signal = true};
  const job_facts failed{.ended_with = outcome::error};
  const job_facts stopped{.ended_with = outcome::cancelled};
  const job_action ends = record_outcome | count_down_parent;
  for (const row& r : std::vector<row>{
           {st::queued, ev::started, none, st::running, count_attempt},
           {st::running, ev::ended, none, st::ok, ends},
           {st::running, ev::ended, failed, st::error, ends},
           {st::running, ev::ended, stopped, st::cancelled, ends},
           {st::queued, ev::ended, {.ended_with = outcome::deadline_exceeded}, st::deadline_exceeded, ends},
           {st::running, ev::ended_retryable, none, st::scheduled, schedule_it},
           {st::running, ev::ended_retryable, marked, st::cancelled, ends},  // never retried
           {st::scheduled, ev::due, none, st::queued, run_it},
           {st::running, ev::waits_for_children, none, st::waiting, schedule_it | keep_children_listed},
           {st::running, ev::waits_for_children, over, st::queued, run_it | wake_count | cancel_children,
            woke_by::children},
           {st::running, ev::waits_for_children, wake_due, st::queued, run_it | wake_count | cancel_children,
            woke_by::deadline},
           {st::running, ev::waits_for_children, marked, st::cancelled, ends},
           {st::running, ev::waits_for_signal, none, st::waiting, schedule_it | keep_children_listed},
           {st::running, ev::waits_for_signal, marked, st::cancelled, ends},
           {st::waiting, ev::child_ended, over, st::queued, run_it | unschedule_it | wake_count | cancel_children,
            woke_by::children},
           {st::waiting, ev::woke, none, st::queued, run_it | wake_count | cancel_children, woke_by::deadline},
           {st::waiting, ev::woke, over, st::queued, run_it | wake_count | cancel_children, woke_by::children},
           {st::waiting, ev::signalled, for_signal, st::queued, run_it | unschedule_it | wake_count, woke_by::signal},
           {st::waiting, ev::wait_limit, for_signal, st::deadline_exceeded, ends},
           {st::queued, ev::cancel_asked, none, st::cancelled, ends | cancel_children},
           {st::scheduled, ev::cancel_asked, none, st::cancelled, ends | unschedule_it | cancel_children},
           {st::waiting, ev::cancel_asked, none, st::cancelled, ends | unschedule_it | cancel_children},
           {st::running, ev::cancel_asked, none, st::running, stop_run | cancel_children},
           {st::running, ev::dead_lettered, none, st::dead, count_down_parent},
           {st::dead, ev::replayed, none, st::queued, run_it},
       }) {
    const job_step step = on_job_event(r.from, r.e, r.facts);
    const std::string what = std::string(to_string(r.from)) + " + " + name(r.e);
    EXPECT_TRUE(step.applies) << what;
    EXPECT_EQ(step.next, r.to) << what << " -> " << to_string(step.next);
    EXPECT_EQ(step.actions, r.actions) << what;
    EXPECT_EQ(step.woke, r.woke) << what;
  }
}

TEST(Lifecycle, AnEventThatDoesNotApplyChangesNothing) {
  const job_facts for_signal{.waits_for_signal = true};
  struct late {
    job_state in;
    job_event e;
    job_facts facts;
  };
  for (const late& l : std::vector<late>{
           {st::running, ev::started, {}},  // a second start
           {st::ok, ev::ended, {}},         // a second finish: the first wins
           {st::cancelled, ev::ended_retryable, {}},
           {st::queued, ev::due, {}},           // a timer of an attempt already moved
           {st::waiting, ev::child_ended, {}},  // its rule not met yet
           {st::waiting, ev::child_ended, {.waits_for_signal = true, .wait_over = true}},  // a person's wait
           {st::queued, ev::woke, {}},                // woken already by its children
           {st::waiting, ev::woke, for_signal},       // a person's wait ends at its limit, not a wake
           {st::waiting, ev::signalled, {}},          // waiting for its children, not a signal
           {st::running, ev::signalled, for_signal},  // signalled twice: delivered once
           {st::queued, ev::wait_limit, for_signal},  // signalled before its limit
           {st::error, ev::cancel_asked, {}},         // finished: cancels nothing
           {st::dead, ev::cancel_asked, {}},
           {st::ok, ev::dead_lettered, {}},
           {st::queued, ev::replayed, {}},
       }) {
    const job_step step = on_job_event(l.in, l.e, l.facts);
    EXPECT_FALSE(step.applies) << to_string(l.in) << " + " << name(l.e);
    EXPECT_EQ(step.next, l.in);
    EXPECT_EQ(step.actions, no_action);
  }
}

TEST(Lifecycle, NothingLeavesAFinalStateButAReplayOfTheDead) {
  for (const job_state s : all_job_states) {
    if (!is_final(s)) continue;
    for (int e = 0; e <= static_cast<int>(ev::replayed); ++e) {
      const job_step step = on_job_event(s, static_cast<job_event>(e), {.waits_for_signal = true, .wait_over = true});
      const bool replay = s == st::dead && static_cast<job_event>(e) == ev::replayed;
      EXPECT_EQ(step.applies, replay) << to_string(s) << " + " << name(static_cast<job_event>(e));
    }
  }
}

TEST(Lifecycle, EveryWayToAnOutcomeCountsDownTheParentOnce) {
  // Every step into a final state counts the job in its parent's wait; none
  // out of one does (a replayed dead child was counted when it died).
  for (const job_state s : all_job_states) {
    for (int e = 0; e <= static_cast<int>(ev::replayed); ++e) {
      for (const bool signal : {false, true}) {
        const job_step step = on_job_event(s, static_cast<job_event>(e),
                                           {.waits_for_signal = signal, .wait_over = true});
        if (!step.applies) continue;
        EXPECT_EQ(has(step.actions, count_down_parent), is_final(step.next) && !is_final(s))
            << to_string(s) << " + " << name(static_cast<job_event>(e));
      }
    }
  }
}

}  // namespace
}  // namespace hourglass::jobs::lifecycle_testing
