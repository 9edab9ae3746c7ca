// A parent job and its children for the child-job tests (memory and
// fleet): handlers registered on a test server by family::setup.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hourglass/server/http_server.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {

// "parent" waits for go(), enqueues the children it is told to (each asking
// `ask`), keeps their answers, and then holds its worker until its context
// ends; "hold" holds its worker until its context ends.
struct family {
  std::atomic<bool> go{false};
  std::atomic<int> children_to_send{1};
  child_job ask{
      .handler = "hold", .body = "c", .freshness = std::chrono::seconds(10), .deadline = std::chrono::seconds(10)};
  std::mutex mu;
  std::vector<child_answer> answers;
  std::atomic<int> holding{0};

  void setup(http_server& s) {
    s.add_handler("parent", [this, &s](const context& ctx, const request_view& req) {
      while (!go.load() && !ctx.done()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ctx.check();
      for (int i = 0; i < children_to_send.load(); ++i) {
        const child_answer a = s.enqueue_child(ctx, req, ask);
        std::lock_guard lock(mu);
        answers.push_back(a);
      }
      return hold(ctx);
    });
    handler_options small;
    small.min_budget = std::chrono::milliseconds(500);
    s.add_handler(
        "hold", [this](const context& ctx, const request_view&) { return hold(ctx); }, small);
  }
  handler_result hold(const context& ctx) {
    ++holding;
    ctx.sleep_until(never);  // woken by its deadline (on the test's clock) or its cancel
    --holding;
    ctx.check();
    return {"held", "text/plain"};
  }
  std::vector<child_answer> sent(std::size_t n) {
    wait_until([&] {
      std::lock_guard lock(mu);
      return answers.size() >= n;
    });
    std::lock_guard lock(mu);
    return answers;
  }
};

}  // namespace hourglass::server::testing
