// A held entry's life (held_entry.hpp) as a table, without a broker, threads
// or a clock: every state against every event, and on any order of events
// an entry ends exactly one way.
#include "held_entry.hpp"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace hourglass::fleet::detail::testing {
namespace {

using S = held_state;
using E = held_event;
using A = held_action;

constexpr S all_states[] = {S::queued, S::running, S::giving_back, S::leaving, S::writing, S::handing_back, S::done};
constexpr E all_events[] = {E::submitted,     E::start_said_run, E::job_ended,      E::outcome_ready, E::refused,
                            E::nothing_ours,  E::drain_began,    E::drain_deadline, E::fenced,        E::lost,
                            E::delete_marked, E::written,        E::handed_back,    E::dropped};

// Every state and event; a pair not listed changes nothing and does nothing.
const std::vector<std::tuple<S, E, S, A>> rows = {
    // delivered, in our executor
    {S::queued, E::start_said_run, S::running, A::run_handler},
    {S::queued, E::job_ended, S::queued, A::settle},
    {S::queued, E::outcome_ready, S::writing, A::write},  // expired at delivery, or settled
    {S::queued, E::refused, S::handing_back, A::hand_back},
    {S::queued, E::nothing_ours, S::done, A::leave},
    {S::queued, E::drain_began, S::giving_back, A::stop},
    {S::queued, E::drain_deadline, S::handing_back, A::hand_back_and_stop},
    {S::queued, E::fenced, S::leaving, A::stop},
    {S::queued, E::lost, S::leaving, A::stop},
    {S::queued, E::delete_marked, S::queued, A::stop_requested},
    // started
    {S::running, E::start_said_run, S::running, A::none},
    {S::running, E::job_ended, S::running, A::settle},
    {S::running, E::outcome_ready, S::writing, A::write},
    {S::running, E::refused, S::handing_back, A::hand_back},
    {S::running, E::nothing_ours, S::done, A::leave},
    {S::running, E::drain_began, S::running, A::none},  // it may finish until the drain's deadline
    {S::running, E::drain_deadline, S::handing_back, A::hand_back_and_stop},
    {S::running, E::fenced, S::leaving, A::stop},
    {S::running, E::lost, S::leaving, A::stop},
    {S::running, E::delete_marked, S::running, A::stop_requested},
    // drained before it started
    {S::giving_back, E::submitted, S::giving_back, A::stop},
    {S::giving_back, E::job_ended, S::handing_back, A::hand_back},
    {S::giving_back, E::drain_deadline, S::handing_back, A::hand_back},
    // fenced or lost
    {S::leaving, E::submitted, S::leaving, A::stop},
    {S::leaving, E::job_ended, S::done, A::leave},
    // waiting for the writer
    {S::writing, E::written, S::done, A::forget},
    {S::writing, E::dropped, S::done, A::forget},
    {S::handing_back, E::handed_back, S::done, A::forget},
};

TEST(HeldEntry, EveryStateAndEvent) {
  for (const S s : all_states) {
    for (const E e : all_events) {
      SCOPED_TRACE(::testing::Message() << "state " << static_cast<int>(s) << ", event " << static_cast<int>(e));
      held_step want{s, A::none};
      for (const auto& [from, ev, to, act] : rows) {
        if (from == s && ev == e) want = {to, act};
      }
      const held_step got = on_held_event(s, e);
      EXPECT_EQ(got.next, want.next);
      EXPECT_EQ(got.action, want.action);
    }
  }
}

TEST(HeldEntry, ItsJobHoldsASlotAndOnlyAnOutcomeOfOursIsRenewed) {
  for (const S s : all_states) {
    const bool in_executor = s == S::queued || s == S::running || s == S::giving_back || s == S::leaving;
    EXPECT_EQ(holds_job(s), in_executor) << static_cast<int>(s);
    EXPECT_EQ(renewed(s), s == S::queued || s == S::running || s == S::writing) << static_cast<int>(s);
  }
}

// One entry driven by events as the consumer's threads would, answering
// settle with `verdict`, and what it did.
struct entry_run {
  S s = S::queued;
  E verdict;
  int endings = 0;                // an outcome to write, a hand-back, or nothing from us
  int handlers_run = 0;           // run_handler
  bool stopped_for_good = false;  // stopped with no outcome of ours (fenced, lost)
  bool wrote_after_stop = false;

  void feed(E e) {
    const held_step st = on_held_event(s, e);
    s = st.next;
    switch (st.action) {
      case A::run_handler:
        ++handlers_run;
        EXPECT_EQ(endings, 0) << "a handler run after its entry's ending was decided";
        break;
      case A::settle: feed(verdict); break;
      case A::write:
        wrote_after_stop |= stopped_for_good;
        ++endings;
        break;
      case A::hand_back:
      case A::hand_back_and_stop:
      case A::leave: ++endings; break;
      case A::stop: stopped_for_good |= s == S::leaving; break;
      default: break;
    }
  }
};

// Whatever arrives in whatever order (a start, a drain, a fence, a loss, a
// DELETE, the writer's answers), an entry ends exactly one way: its outcome
// written, handed back, or left to the fleet (nothing from us); it runs its
// handler at most once, and a daemon that stopped a job because the fleet
// may have it (fenced, lost) never writes an outcome for it.
TEST(HeldEntry, EndsExactlyOneWayOnAnyOrderOfEvents) {
  const E midlife[] = {E::submitted,     E::start_said_run, E::drain_began, E::drain_deadline, E::fenced, E::lost,
                       E::delete_marked, E::job_ended,      E::written,     E::handed_back,    E::dropped};
  for (const E verdict : {E::outcome_ready, E::refused, E::nothing_ours}) {
    for (const E a : midlife) {
      for (const E b : midlife) {
        for (const E c : midlife) {
          for (const E d : midlife) {
            SCOPED_TRACE(::testing::Message()
                         << "events " << static_cast<int>(a) << " " << static_cast<int>(b) << " " << static_cast<int>(c)
                         << " " << static_cast<int>(d) << ", verdict " << static_cast<int>(verdict));
            entry_run r;
            r.verdict = verdict;
            for (const E e : {a, b, c, d}) r.feed(e);
            EXPECT_LE(r.endings, 1);
            // Its job ends (the executor always ends it), then the writer answers.
            for (const E e : {E::job_ended, E::written, E::handed_back}) r.feed(e);
            EXPECT_EQ(r.s, S::done);
            EXPECT_EQ(r.endings, 1);
            EXPECT_LE(r.handlers_run, 1);
            EXPECT_FALSE(r.wrote_after_stop) << "an outcome from a daemon that may not own the job";
          }
        }
      }
    }
  }
}

// The events that stop a job are the ones the consumer gives a stop list to.
TEST(HeldEntry, OnlyTheStoppingEventsStopAJob) {
  for (const S s : all_states) {
    for (const E e : all_events) {
      const A a = on_held_event(s, e).action;
      if (a == A::stop || a == A::stop_requested || a == A::hand_back_and_stop) {
        EXPECT_TRUE(e == E::submitted || e == E::drain_began || e == E::drain_deadline || e == E::fenced ||
                    e == E::lost || e == E::delete_marked)
            << static_cast<int>(s) << " " << static_cast<int>(e);
      }
    }
  }
}

}  // namespace
}  // namespace hourglass::fleet::detail::testing
