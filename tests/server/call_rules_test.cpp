#include "upstream/call_rules.hpp"

#include <gtest/gtest.h>

namespace hourglass::server::detail {
namespace {

TEST(CallRules, WhatAnAnswerSaysAboutTheUpstream) {
  EXPECT_EQ(verdict_of_answer(200, ""), call_verdict::success);
  EXPECT_EQ(verdict_of_answer(204, ""), call_verdict::success);
  // Our request was at fault; the upstream is answering.
  EXPECT_EQ(verdict_of_answer(400, ""), call_verdict::ignored);
  EXPECT_EQ(verdict_of_answer(404, ""), call_verdict::ignored);
  EXPECT_EQ(verdict_of_answer(413, ""), call_verdict::ignored);
  // It was given less than its minimum: not its fault.
  EXPECT_EQ(verdict_of_answer(504, "admission"), call_verdict::ignored);
  // It had the budget it needed and did not finish in it.
  EXPECT_EQ(verdict_of_answer(504, "run"), call_verdict::failure);
  EXPECT_EQ(verdict_of_answer(504, "queue"), call_verdict::failure);
  EXPECT_EQ(verdict_of_answer(504, "downstream"), call_verdict::failure);
  EXPECT_EQ(verdict_of_answer(504, ""), call_verdict::failure) << "a 504 from a proxy, without our body";
  EXPECT_EQ(verdict_of_answer(500, ""), call_verdict::failure);
  EXPECT_EQ(verdict_of_answer(503, ""), call_verdict::failure) << "overloaded, or its own breaker is open";
  EXPECT_EQ(verdict_of_answer(101, ""), call_verdict::failure);
  EXPECT_EQ(verdict_of_answer(302, ""), call_verdict::failure);
}

TEST(CallRules, AStreamCutOffCountsAsTheAnswerItsOutcomeWouldHaveHad) {
  const auto check = [](unsigned status, std::string_view trailer, unsigned want, std::string_view want_stage) {
    const effective_answer a = effective_answer_of(status, "", trailer);
    EXPECT_EQ(a.http_status, want) << trailer;
    EXPECT_EQ(a.stage, want_stage) << trailer;
  };
  check(200, "", 200, "");  // not a stream
  check(200, "ok", 200, "");
  check(200, "ok; committed=true", 200, "");
  check(200, "deadline_exceeded; stage=idle", 504, "idle");
  check(200, "deadline_exceeded; stage=run; committed=true", 504, "run");
  check(200, "deadline_exceeded", 504, "");
  check(200, "error", 500, "");
  check(200, "cancelled", 500, "");
  check(404, "deadline_exceeded; stage=run", 404, "");  // a trailer on a non-2xx changes nothing
  EXPECT_EQ(effective_answer_of(504, "admission", "").stage, "admission");
  const effective_answer cut = effective_answer_of(200, "", "deadline_exceeded; stage=run");
  EXPECT_EQ(verdict_of_answer(cut.http_status, cut.stage), call_verdict::failure);
}

TEST(CallRules, WhatACallWithoutAnAnswerSays) {
  EXPECT_EQ(verdict_of_abort(status::ok()), call_verdict::failure) << "an I/O error: refused, reset, garbage";
  EXPECT_EQ(verdict_of_abort(status::expired(expiry_stage::run)), call_verdict::failure)
      << "our deadline ran out while the upstream held the call";
  EXPECT_EQ(verdict_of_abort(status::expired(expiry_stage::idle)), call_verdict::ignored) << "our own idle limit";
  EXPECT_EQ(verdict_of_abort(status::cancelled(cancel_cause::caller_gone)), call_verdict::ignored);
  EXPECT_EQ(verdict_of_abort(status::cancelled(cancel_cause::shutdown)), call_verdict::ignored);
}

}  // namespace
}  // namespace hourglass::server::detail
