#include "hourglass/run_outcome.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace hourglass {
namespace {

constexpr status kOk = status::ok();
constexpr status kError = status::error();
constexpr status kRun = status::expired(expiry_stage::run);
constexpr status kQueue = status::expired(expiry_stage::queue);
constexpr status kDownstream = status::expired(expiry_stage::downstream);
constexpr status kAdmission = status::expired(expiry_stage::admission);
constexpr status kIdle = status::expired(expiry_stage::idle);
constexpr status kCaller = status::cancelled(cancel_cause::caller_gone);
constexpr status kShutdown = status::cancelled(cancel_cause::shutdown);

struct row {
  run_ending how;
  status thrown;
  status context;
  bool past_deadline;
  run_verdict want;
};

// Every way a started job can end, against every context state that matters.
TEST(RunOutcome, Table) {
  const std::vector<row> rows = {
      // returned
      {run_ending::returned, kOk, kOk, false, {kOk, false}},
      {run_ending::returned, kOk, kOk, true, {kRun, true}},   // fifo / timer not fired: late
      {run_ending::returned, kOk, kRun, true, {kRun, true}},  // the deadline fired: late
      {run_ending::returned, kOk, kRun, false, {kRun, true}},
      {run_ending::returned, kOk, kCaller, false, {kCaller, false}},  // cancelled: result unused, not late
      {run_ending::returned, kOk, kShutdown, true, {kShutdown, false}},
      // stopped (stopped_error)
      {run_ending::stopped, kRun, kRun, true, {kRun, false}},  // check() at the deadline
      {run_ending::stopped, kCaller, kCaller, false, {kCaller, false}},
      {run_ending::stopped, kRun, kCaller, false, {kCaller, false}},         // the context's first cause wins
      {run_ending::stopped, kDownstream, kOk, false, {kDownstream, false}},  // a hop ran out
      {run_ending::stopped, kDownstream, kRun, true, {kRun, false}},
      {run_ending::stopped, kQueue, kRun, true, {kQueue, false}},  // never really started: kept
      {run_ending::stopped, kQueue, kOk, false, {kQueue, false}},
      {run_ending::stopped, kAdmission, kOk, false, {kRun, false}},  // it was started: stage run
      {run_ending::stopped, kError, kOk, false, {kError, false}},
      {run_ending::stopped, kError, kShutdown, false, {kShutdown, false}},
      // threw
      {run_ending::threw, kOk, kOk, false, {kError, false}},
      {run_ending::threw, kOk, kOk, true, {kRun, false}},  // out of time: nothing produced
      {run_ending::threw, kOk, kRun, true, {kRun, false}},
      {run_ending::threw, kOk, kCaller, false, {kCaller, false}},
      // the idle limit: its stage is kept, like queue and downstream
      {run_ending::stopped, kIdle, kIdle, false, {kIdle, false}},  // check() once idle
      {run_ending::returned, kOk, kIdle, false, {kIdle, true}},    // finished after it was given up: wasted
      {run_ending::threw, kOk, kIdle, false, {kIdle, false}},
      {run_ending::stopped, kRun, kIdle, true, {kIdle, false}},  // the context's first cause wins
  };
  for (const row& r : rows) {
    SCOPED_TRACE(::testing::Message() << "how " << static_cast<int>(r.how) << ", thrown " << describe(r.thrown)
                                      << ", context " << describe(r.context) << ", past " << r.past_deadline);
    const run_verdict v = run_outcome({r.how, r.thrown, r.context, r.past_deadline});
    EXPECT_EQ(v.st, r.want.st) << describe(v.st);
    EXPECT_EQ(v.completed_late, r.want.completed_late);
  }
}

// A started job never ends rejected, never with stage admission or none.
TEST(RunOutcome, AStartedJobEndsWithARunStage) {
  const status all[] = {kOk,        kError, kRun,    kQueue,    kDownstream,
                        kAdmission, kIdle,  kCaller, kShutdown, status::expired(expiry_stage::none)};
  for (const auto how : {run_ending::returned, run_ending::stopped, run_ending::threw}) {
    for (const status& thrown : all) {
      for (const status& ctx : all) {
        if (ctx.code == outcome::error) continue;  // a context stops by deadline or cancel only
        for (const bool past : {false, true}) {
          const run_verdict v = run_outcome({how, thrown, ctx, past});
          if (v.st.code == outcome::deadline_exceeded) {
            EXPECT_TRUE(v.st.stage == expiry_stage::run || v.st.stage == expiry_stage::queue ||
                        v.st.stage == expiry_stage::downstream || v.st.stage == expiry_stage::idle);
          }
          if (v.completed_late) {
            EXPECT_EQ(how, run_ending::returned);
          }
        }
      }
    }
  }
}

static_assert(run_outcome({run_ending::returned, kOk, kOk, false}).st == kOk, "usable in constant expressions");

}  // namespace
}  // namespace hourglass
