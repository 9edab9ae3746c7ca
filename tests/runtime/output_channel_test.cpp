// A job's streamed output (output_channel.hpp): order, wake-ups, and the
// back-pressure rules, exact on a manual clock. A slow reader's wait counts
// against the deadline and is not progress.
#include "hourglass/output_channel.hpp"

#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>

namespace hourglass {
namespace {

using namespace std::chrono_literals;

// Writes `chunk` on another thread; the future holds the stop reason, or ok.
std::future<status> write_async(output_channel& out, const context& ctx, std::string chunk) {
  return std::async(std::launch::async, [&out, ctx, chunk] {
    try {
      out.write(ctx, chunk);
      return status::ok();
    } catch (const stopped_error& e) {
      return e.why();
    }
  });
}

// Waits (for the event, up to 10 s) until `n` writers wait for room in `out`,
// then checks that the writer's future has not finished.
bool held_back(const output_channel& out, std::future<status>& f, std::size_t n = 1) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (out.waiting_writers() < n && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  // A moment more: a writer woken by mistake would finish in it.
  return out.waiting_writers() == n && f.wait_for(20ms) == std::future_status::timeout;
}

// The writer's result, failing instead of hanging when it never comes.
status result_of(std::future<status>& f) {
  if (f.wait_for(10s) != std::future_status::ready) {
    ADD_FAILURE() << "the writer was never woken";
    return status::error();
  }
  return f.get();
}

TEST(OutputChannel, ChunksArriveInOrderAndEachWriteIsProgress) {
  manual_clock clk;
  context_source ctx(clk, clk.now() + 1h, 100ms);
  output_channel out;
  out.write(ctx, "one ");
  clk.advance(90ms);
  out.write(ctx, "two ");  // progress: the idle limit now runs out 100 ms from here
  EXPECT_EQ(ctx.get().idle_deadline(), clk.now() + 100ms);
  clk.advance(90ms);
  out.write(ctx, "three");
  EXPECT_FALSE(ctx.get().done());
  EXPECT_EQ(out.buffered(), 13u);
  EXPECT_EQ(out.take(), "one two three");
  EXPECT_EQ(out.buffered(), 0u);
  EXPECT_EQ(out.take(), "");
  EXPECT_EQ(out.bytes_written(), 13u);
}

TEST(OutputChannel, OnReadableRunsOnceWhenBytesArriveOrAtOnceIfTheyAreThere) {
  manual_clock clk;
  context_source ctx(clk);
  output_channel out;
  int calls = 0;
  out.on_readable([&] { ++calls; });
  EXPECT_EQ(calls, 0);
  out.write(ctx, "a");
  EXPECT_EQ(calls, 1);
  out.write(ctx, "b");  // one-shot: not asked again
  EXPECT_EQ(calls, 1);
  out.on_readable([&] { ++calls; });  // bytes already buffered: at once
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(out.take(), "ab");
  out.on_readable([&] { calls += 10; });
  out.on_readable([&] { ++calls; });  // replaces the one before
  out.write(ctx, "c");
  EXPECT_EQ(calls, 3);
}

TEST(OutputChannel, AFullBufferHoldsTheWriterUntilTheReaderTakes) {
  manual_clock clk;
  context_source ctx(clk, clk.now() + 1h);
  output_channel out(8);
  out.write(ctx, "12345");
  out.write(ctx, "6789");  // 5 < 8 buffered: taken whole, 9 now
  auto blocked = write_async(out, ctx, "abc");
  EXPECT_TRUE(held_back(out, blocked));
  EXPECT_EQ(out.buffered(), 9u);
  EXPECT_EQ(out.take(), "123456789");
  EXPECT_EQ(result_of(blocked), status::ok());
  EXPECT_EQ(out.take(), "abc");
}

TEST(OutputChannel, AWriterHeldBackStopsExactlyAtTheDeadline) {
  manual_clock clk;
  const time_point t0 = clk.now();
  context_source ctx(clk, t0 + 250ms);
  output_channel out(4);
  out.write(ctx, "full");
  auto blocked = write_async(out, ctx, "more");
  ASSERT_TRUE(held_back(out, blocked));
  clk.advance(250ms - 1ns);
  EXPECT_TRUE(held_back(out, blocked));
  clk.advance(1ns);
  EXPECT_EQ(result_of(blocked), status::expired(expiry_stage::run));
  EXPECT_EQ(out.take(), "full");  // the stopped write appended nothing
}

TEST(OutputChannel, WaitingForASlowReaderIsNotProgress) {
  manual_clock clk;
  const time_point t0 = clk.now();
  context_source ctx(clk, t0 + 1h, 100ms);
  output_channel out(4);
  out.write(ctx, "full");  // progress at t0
  auto blocked = write_async(out, ctx, "more");
  ASSERT_TRUE(held_back(out, blocked));
  clk.advance(100ms - 1ns);
  EXPECT_TRUE(held_back(out, blocked));
  clk.advance(1ns);  // 100 ms since the last accepted write, the deadline an hour away
  EXPECT_EQ(result_of(blocked), status::expired(expiry_stage::idle));
}

TEST(OutputChannel, ACancelWakesAWaitingWriter) {
  manual_clock clk;
  context_source ctx(clk);
  output_channel out(1);
  out.write(ctx, "x");
  auto blocked = write_async(out, ctx, "y");
  EXPECT_TRUE(held_back(out, blocked));
  ctx.cancel(cancel_cause::requested);
  EXPECT_EQ(result_of(blocked), status::cancelled(cancel_cause::requested));
}

TEST(OutputChannel, OnceTheReaderClosedEveryWriteThrows) {
  manual_clock clk;
  context_source ctx(clk);
  output_channel out(1);
  out.write(ctx, "x");
  auto blocked = write_async(out, ctx, "y");
  EXPECT_TRUE(held_back(out, blocked));
  out.close();
  EXPECT_EQ(result_of(blocked), status::cancelled(cancel_cause::caller_gone));
  EXPECT_TRUE(out.closed());
  out.take();
  auto later = write_async(out, ctx, "z");
  EXPECT_EQ(result_of(later), status::cancelled(cancel_cause::caller_gone));
  EXPECT_EQ(out.bytes_written(), 1u);
}

TEST(OutputChannel, AnEmptyWriteIsNotOutput) {
  manual_clock clk;
  context_source ctx(clk, clk.now() + 1h, 100ms);
  output_channel out;
  int calls = 0;
  out.on_readable([&] { ++calls; });
  clk.advance(60ms);
  out.write(ctx, "");
  EXPECT_EQ(calls, 0) << "nobody is woken for nothing";
  EXPECT_EQ(ctx.get().idle_deadline(), clk.now() + 40ms) << "not progress";
  EXPECT_EQ(out.bytes_written(), 0u);
}

TEST(OutputChannel, AStoppedContextWritesNothing) {
  manual_clock clk;
  context_source ctx(clk, clk.now() + 10ms);
  output_channel out;
  clk.advance(10ms);
  EXPECT_THROW(out.write(ctx, "late"), stopped_error);
  EXPECT_EQ(out.buffered(), 0u);
}

}  // namespace
}  // namespace hourglass
