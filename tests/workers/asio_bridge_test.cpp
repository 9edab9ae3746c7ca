#include "hourglass/asio_bridge.hpp"

#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <future>
#include <optional>
#include <thread>

namespace hourglass {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using strand_t = asio::strand<asio::io_context::executor_type>;

// An io_context run by one thread for the length of a test.
class io_thread {
 public:
  io_thread() : work_(asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}
  ~io_thread() {
    work_.reset();
    io_.stop();
    thread_.join();
  }
  asio::io_context& io() { return io_; }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

// A one-hour timer wait bound to `ctx`; the future yields its error code.
struct bound_wait {
  bound_wait(asio::io_context& io, const context& ctx)
      : strand(asio::make_strand(io)), timer(strand, 1h), stop(ctx, strand) {
    asio::post(strand, [this] {
      timer.async_wait(
          asio::bind_cancellation_slot(stop.slot(), [this](boost::system::error_code ec) { done.set_value(ec); }));
      stop.emit_if_stopped();
      started.set_value();
    });
  }
  ~bound_wait() {
    if (result.wait_for(0s) != std::future_status::ready) cancel_timer();  // a failed test: end the wait
    result.wait();
  }
  std::optional<boost::system::error_code> wait(std::chrono::milliseconds limit) {
    if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
    return result.get();
  }
  void cancel_timer() {
    std::promise<void> p;
    asio::post(strand, [&] {
      timer.cancel();
      p.set_value();
    });
    p.get_future().wait();
  }

  strand_t strand;
  asio::steady_timer timer;
  asio_cancellation<strand_t> stop;  // after the timer: destroyed before it
  std::promise<boost::system::error_code> done;
  std::shared_future<boost::system::error_code> result = done.get_future().share();
  std::promise<void> started;  // the wait is on the timer, bound to the context
  std::shared_future<void> waiting = started.get_future().share();
};

TEST(AsioBridge, CancellingTheContextAbortsATimerAtOnce) {
  io_thread io;
  manual_clock clk;
  context_source src(clk, clk.now() + 10s);
  bound_wait w(io.io(), src.get());
  // Cancelled while the timer waits: the wait has started, bound to the context.
  ASSERT_EQ(w.waiting.wait_for(5s), std::future_status::ready) << "the wait never started";
  const auto t0 = std::chrono::steady_clock::now();
  src.cancel(cancel_cause::caller_gone);
  const auto ec = w.wait(5000ms);
  ASSERT_TRUE(ec.has_value()) << "the timer was not aborted";
  EXPECT_EQ(*ec, asio::error::operation_aborted);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_TRUE(w.stop.stop_requested());
}

TEST(AsioBridge, ReachingTheDeadlineOnTheManualClockAbortsATimer) {
  io_thread io;
  manual_clock clk;
  context_source src(clk, clk.now() + 250ms);
  bound_wait w(io.io(), src.get());
  clk.advance(249ms);
  EXPECT_FALSE(w.wait(20ms).has_value()) << "aborted before the deadline";
  clk.advance(1ms);  // the context's timer fires inside advance()
  const auto ec = w.wait(5000ms);
  ASSERT_TRUE(ec.has_value()) << "the timer was not aborted at the deadline";
  EXPECT_EQ(*ec, asio::error::operation_aborted);
  EXPECT_EQ(src.get().stop_status(), status::expired(expiry_stage::run));
}

TEST(AsioBridge, AContextStoppedBeforeTheOperationStartsStillAbortsIt) {
  io_thread io;
  manual_clock clk;
  context_source src(clk);
  src.cancel();
  bound_wait w(io.io(), src.get());  // the emit was posted before async_wait was bound
  const auto ec = w.wait(5000ms);
  ASSERT_TRUE(ec.has_value());
  EXPECT_EQ(*ec, asio::error::operation_aborted);
}

TEST(AsioBridge, ACompletedOperationIsNotDisturbedByALaterStop) {
  io_thread io;
  manual_clock clk;
  context_source src(clk);
  bound_wait w(io.io(), src.get());
  w.cancel_timer();  // the operation ends by itself first
  const auto ec = w.wait(5000ms);
  ASSERT_TRUE(ec.has_value());
  src.cancel();  // emits on a slot whose operation is over: harmless
  std::promise<void> flushed;
  asio::post(w.strand, [&] { flushed.set_value(); });
  EXPECT_EQ(flushed.get_future().wait_for(5s), std::future_status::ready);
}

TEST(AsioBridge, APostedEmitOutlivingTheBindingIsHarmless) {
  asio::io_context io;  // not running yet: the emit stays queued
  manual_clock clk;
  context_source src(clk);
  {
    auto strand = asio::make_strand(io);
    asio::steady_timer timer(strand, 1h);
    asio_cancellation stop(src.get(), strand);
    timer.async_wait(asio::bind_cancellation_slot(stop.slot(), [](boost::system::error_code) {}));
    src.cancel();    // posts an emit to the strand
    timer.cancel();  // the wait ends; the binding and the timer are destroyed below
  }
  EXPECT_GE(io.run(), 1u);  // runs the wait's handler and the orphaned emit: no effect, no crash
}

TEST(AsioBridge, ABindingDeregistersFromTheContext) {
  asio::io_context io;
  manual_clock clk;
  context_source ctx(clk);
  {
    asio_cancellation stop(ctx.get(), io.get_executor());
    EXPECT_FALSE(stop.stop_requested());
  }
  ctx.cancel();  // nobody is listening any more: nothing is posted
  EXPECT_EQ(io.run(), 0u);
}

}  // namespace
}  // namespace hourglass
