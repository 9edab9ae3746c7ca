#include "hourglass/server/builtin_handlers.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <utility>

#include "common/eventually.hpp"
#include "common/process.hpp"
#include "hourglass/clock.hpp"
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

// The real clock, its readings counted: a handler that checks its context's
// deadline reads it.
class counting_clock final : public clock {
 public:
  time_point now() const noexcept override {
    reads.fetch_add(1);
    return real_clock().now();
  }
  timer_id schedule(time_point when, std::function<void()> fn) override {
    return real_clock().schedule(when, std::move(fn));
  }
  bool cancel(timer_id id) noexcept override { return real_clock().cancel(id); }
  bool is_steady_clock() const noexcept override { return true; }

  mutable std::atomic<std::uint64_t> reads{0};
};

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

  counting_clock clk;
  context_source src(clk, clk.now() + 1h);  // a deadline: each check of it reads the clock
  const std::uint64_t reads_before = clk.reads.load();
  auto done = std::async(std::launch::async, [&] {
    try {
      spin(src.get(), view(R"({"us": 30000000})"));
      return false;
    } catch (const stopped_error&) {
      return true;
    }
  });
  // Cancelled mid-spin: it has checked its context at least once.
  EXPECT_TRUE(test_common::eventually([&] { return clk.reads.load() > reads_before; })) << "the spin never began";
  src.cancel();
  ASSERT_EQ(done.wait_for(2s), std::future_status::ready);
  EXPECT_TRUE(done.get());
}

}  // namespace
}  // namespace hourglass::server
