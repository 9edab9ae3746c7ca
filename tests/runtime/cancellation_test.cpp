#include "hourglass/cancellation.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

namespace hourglass {
namespace {

TEST(Cancellation, DefaultTokenCannotFire) {
  cancellation_token t;
  EXPECT_FALSE(t.stop_possible());
  EXPECT_FALSE(t.stop_requested());
  int calls = 0;
  cancellation_callback cb(t, [&]() noexcept { calls++; });
  EXPECT_EQ(calls, 0);
}

TEST(Cancellation, FirstReasonWinsAndCallbackRunsOnce) {
  cancellation_source src;
  int calls = 0;
  cancellation_callback cb(src.token(), [&]() noexcept { calls++; });
  EXPECT_TRUE(src.request_stop(status::cancelled(cancel_cause::caller_gone)));
  EXPECT_FALSE(src.request_stop(status::expired(expiry_stage::run)));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(src.token().reason(), status::cancelled(cancel_cause::caller_gone));
}

TEST(Cancellation, RegisteringAfterStopRunsAtOnce) {
  cancellation_source src;
  src.request_stop();
  int calls = 0;
  cancellation_callback cb(src.token(), [&]() noexcept { calls++; });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(src.registered_callbacks(), 0u);
}

TEST(Cancellation, DestroyedCallbackDeregisters) {
  cancellation_source src;
  int calls = 0;
  {
    cancellation_callback cb(src.token(), [&]() noexcept { calls++; });
    EXPECT_EQ(src.registered_callbacks(), 1u);
  }
  EXPECT_EQ(src.registered_callbacks(), 0u);
  src.request_stop();
  EXPECT_EQ(calls, 0);
}

TEST(Cancellation, CallbackMayDestroyItself) {
  cancellation_source src;
  std::optional<cancellation_callback<std::function<void()>>> self;
  int calls = 0;
  self.emplace(src.token(), std::function<void()>([&] {
                 calls++;
                 self.reset();
               }));
  src.request_stop();
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(self.has_value());
}

// Destroying a callback while it runs on another thread waits for it to return.
TEST(Cancellation, DestructionWaitsForRunningCallback) {
  cancellation_source src;
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  auto cb = std::make_unique<cancellation_callback<std::function<void()>>>(src.token(), std::function<void()>([&] {
                                                                             entered = true;
                                                                             while (!release.load())
                                                                               std::this_thread::yield();
                                                                             finished = true;
                                                                           }));
  std::thread firer([&] { src.request_stop(); });
  while (!entered.load()) std::this_thread::yield();
  std::thread releaser([&] {
    // Whatever the interleaving, the destructor below must not return before `finished`.
    release = true;
  });
  cb.reset();
  EXPECT_TRUE(finished.load());
  firer.join();
  releaser.join();
}

TEST(Cancellation, ManyCallbacksAllFire) {
  cancellation_source src;
  std::atomic<int> calls{0};
  std::vector<std::unique_ptr<cancellation_callback<std::function<void()>>>> cbs;
  for (int i = 0; i < 1000; ++i) {
    cbs.push_back(std::make_unique<cancellation_callback<std::function<void()>>>(
        src.token(), std::function<void()>([&] { calls++; })));
  }
  for (int i = 0; i < 1000; i += 2) cbs[static_cast<std::size_t>(i)].reset();
  EXPECT_EQ(src.registered_callbacks(), 500u);
  src.request_stop();
  EXPECT_EQ(calls.load(), 500);
  EXPECT_EQ(src.registered_callbacks(), 0u);
}

}  // namespace
}  // namespace hourglass
