#include "core/metrics_page.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <latch>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "common/eventually.hpp"
#include "common/thread_state.hpp"

namespace hourglass::server::detail {
namespace {

using namespace std::chrono_literals;

using ::hourglass::testing::this_thread_id;
using ::hourglass::testing::thread_sleeps;

// A page that says how many times it was rendered.
struct counting_render {
  std::atomic<int>& n;
  std::string operator()() const { return "page " + std::to_string(++n) + "\n"; }
};

TEST(MetricsPageCache, KeptForTheIntervalOnTheClockExactly) {
  manual_clock clk;
  std::atomic<int> renders{0};
  metrics_page_cache cache(clk, 1s);
  EXPECT_EQ(cache.get(counting_render{renders}), "page 1\n");
  EXPECT_EQ(cache.get(counting_render{renders}), "page 1\n");
  clk.advance(999'999'999ns);
  EXPECT_EQ(cache.get(counting_render{renders}), "page 1\n") << "1 ns before the interval is over";
  clk.advance(1ns);
  EXPECT_EQ(cache.get(counting_render{renders}), "page 2\n") << "at the interval: rendered anew";
  clk.advance(500ms);
  EXPECT_EQ(cache.get(counting_render{renders}), "page 2\n") << "the interval counts from the last rendering";
  clk.advance(10s);
  EXPECT_EQ(cache.get(counting_render{renders}), "page 3\n");
  EXPECT_EQ(renders.load(), 3);
}

TEST(MetricsPageCache, ZeroOrLessKeepsNothing) {
  manual_clock clk;
  std::atomic<int> renders{0};
  metrics_page_cache off(clk, duration::zero());
  EXPECT_EQ(off.get(counting_render{renders}), "page 1\n");
  EXPECT_EQ(off.get(counting_render{renders}), "page 2\n") << "time did not move; rendered anyway";
  metrics_page_cache negative(clk, -1s);
  EXPECT_EQ(negative.get(counting_render{renders}), "page 3\n");
  EXPECT_EQ(negative.get(counting_render{renders}), "page 4\n");
}

TEST(MetricsPageCache, ARenderThatThrowsKeepsNothing) {
  manual_clock clk;
  std::atomic<int> renders{0};
  metrics_page_cache cache(clk, 1s);
  EXPECT_THROW(cache.get([]() -> std::string { throw std::runtime_error("no page"); }), std::runtime_error);
  EXPECT_EQ(cache.get(counting_render{renders}), "page 1\n");
  EXPECT_EQ(cache.get(counting_render{renders}), "page 1\n");
}

// Scrapes arriving together while one renders: one page is rendered, and
// every scrape gets it.
TEST(MetricsPageCache, ConcurrentScrapesRenderOncePerInterval) {
  manual_clock clk;
  std::atomic<int> renders{0};
  metrics_page_cache cache(clk, 1s);
  constexpr int kThreads = 8;
  for (int round = 1; round <= 2; ++round) {
    std::latch start(kThreads);
    std::atomic<int> arrived{0};
    std::vector<std::atomic<long>> ids(kThreads);
    // A render that ends only once every other scrape has arrived and is
    // asleep: waiting for the cache (or in a render of its own, which the
    // count of renders then shows).
    const auto slow_render = [&] {
      const long self = this_thread_id();
      EXPECT_TRUE(test_common::eventually([&] {
        if (arrived.load() < kThreads) return false;
        for (const auto& id : ids) {
          if (id.load() != self && !thread_sleeps(id.load())) return false;
        }
        return true;
      })) << "the other scrapes never came";
      return counting_render{renders}();
    };
    std::vector<std::string> pages(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        ids[i] = this_thread_id();
        arrived.fetch_add(1);
        pages[i] = cache.get(slow_render);
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(renders.load(), round);
    for (const auto& p : pages) EXPECT_EQ(p, "page " + std::to_string(round) + "\n");
    clk.advance(1s);
  }
}

}  // namespace
}  // namespace hourglass::server::detail
