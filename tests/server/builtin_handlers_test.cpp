#include "hourglass/server/builtin_handlers.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <future>
#include <thread>

#include "common/process.hpp"
#include "hourglass/context.hpp"

namespace hourglass::server {
namespace {

using namespace std::chrono_literals;

request_view view(std::string_view body) {
  request_view v;
  v.body = body;
  return v;
}

using test_common::io_thread;

TEST(BuiltinHandlers, EchoReturnsItsInput) {
  request_view v = view("abc");
  v.content_type = "text/plain";
  const auto r = echo_handler()(context(), v);
  EXPECT_EQ(r.body, "abc");
  EXPECT_EQ(r.content_type, "text/plain");
  EXPECT_EQ(echo_handler()(context(), view("")).content_type, "application/octet-stream");
}

TEST(BuiltinHandlers, BadInputIsAHandlerError400) {
  io_thread io;
  upstream_client client(io.io, {});
  const std::pair<handler_fn, const char*> cases[] = {
      {sleep_handler(), "{}"},
      {sleep_handler(), R"({"ms": -1})"},
      {sleep_handler(), R"({"ms": "5"})"},
      {sleep_handler(), R"({"ms": 3600001})"},
      {sleep_handler(), "[1]"},
      {spin_handler(), R"({"us": 1.5})"},
      {spin_handler(), "nope"},
      {call_handler(client), R"({"upstream": "x", "handler": "echo"})"},
      {call_handler(client), R"({"handler": "echo"})"},
  };
  for (const auto& [fn, body] : cases) {
    try {
      fn(context(), view(body));
      ADD_FAILURE() << "accepted " << body;
    } catch (const handler_error& e) {
      EXPECT_EQ(e.http_status(), 400u) << body;
    }
  }
}

// Runs the sleep handler on another thread; its outcome, or the stop status.
std::future<status> sleep_async(context ctx, std::string body) {
  return std::async(std::launch::async, [ctx = std::move(ctx), body = std::move(body)] {
    try {
      EXPECT_EQ(sleep_handler()(ctx, view(body)).body.rfind("{\"slept_ms\": ", 0), 0u);
      return status::ok();
    } catch (const stopped_error& e) {
      return e.why();
    }
  });
}

TEST(BuiltinHandlers, SleepWaitsOnTheContextsClock) {
  manual_clock clk;
  context_source src(clk);
  auto done = sleep_async(src.get(), R"({"ms": 30})");
  ASSERT_TRUE(clk.wait_for_timers(1));
  clk.advance(29ms);
  EXPECT_EQ(done.wait_for(20ms), std::future_status::timeout) << "woke before its 30 ms";
  clk.advance(1ms);
  ASSERT_EQ(done.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(done.get(), status::ok());
}

TEST(BuiltinHandlers, SleepStopsAtOnceWhenCancelled) {
  manual_clock clk;
  context_source src(clk);
  auto done = sleep_async(src.get(), R"({"ms": 60000})");
  ASSERT_TRUE(clk.wait_for_timers(1));
  src.cancel(cancel_cause::caller_gone);
  ASSERT_EQ(done.wait_for(5s), std::future_status::ready) << "the clock did not move: the cancel woke it";
  EXPECT_EQ(done.get(), status::cancelled(cancel_cause::caller_gone));
}

TEST(BuiltinHandlers, SleepStopsAtTheDeadlineOfAManualClock) {
  manual_clock clk;
  context_source src(clk, clk.now() + 1s);
  auto done = sleep_async(src.get(), R"({"ms": 60000})");
  clk.advance(1s);
  ASSERT_EQ(done.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(done.get().code, outcome::deadline_exceeded);
}

TEST(BuiltinHandlers, SpinBurnsAndChecksOften) {
  const auto spin = spin_handler();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(spin(context(), view(R"({"us": 2000})")).body, "{\"spun_us\": 2000}\n");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 2ms);

  context_source src(real_clock());
  auto done = std::async(std::launch::async, [&] {
    try {
      spin(src.get(), view(R"({"us": 30000000})"));
      return false;
    } catch (const stopped_error&) {
      return true;
    }
  });
  std::this_thread::sleep_for(10ms);
  src.cancel();
  ASSERT_EQ(done.wait_for(2s), std::future_status::ready);
  EXPECT_TRUE(done.get());
}

}  // namespace
}  // namespace hourglass::server
