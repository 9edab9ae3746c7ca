#include "hourglass/outcome.hpp"

#include <gtest/gtest.h>

namespace hourglass {
namespace {

// The vocabulary's retry meaning, code by code.
TEST(Outcome, NamesAndRetryMeaning) {
  struct row {
    status st;
    const char* described;
    bool terminal, retryable;
  };
  const row rows[] = {
      {status::ok(), "ok", false, false},
      {status::error(), "error", false, true},
      {status::rejected(reject_reason::queue_full), "rejected/queue_full", false, false},
      {status::rejected(reject_reason::shutting_down), "rejected/shutting_down", false, false},
      {status::expired(expiry_stage::queue), "deadline_exceeded/queue", true, false},
      {status::cancelled(cancel_cause::caller_gone), "cancelled/caller_gone", true, false},
      {status::invalid(), "invalid", false, false},  // bad input: the same input fails again
  };
  for (const row& r : rows) {
    EXPECT_EQ(describe(r.st), r.described);
    EXPECT_EQ(r.st.terminal(), r.terminal) << r.described;
    EXPECT_EQ(r.st.retryable(), r.retryable) << r.described;
  }
  EXPECT_EQ(to_string(outcome::invalid), "invalid");
}

}  // namespace
}  // namespace hourglass
