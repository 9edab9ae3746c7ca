// A parent that fans out to three children and waits for them, for the
// fan-in tests (memory and fleet): handlers registered by gatherers::setup.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hourglass/server/http_server.hpp"

namespace hourglass::server::testing {

using namespace std::chrono_literals;

// "gather" enqueues three "work" children and waits for them by `rule`;
// resumed, it answers "<woke_by> <state>[=<result>] ..." of its children.
// Child i works until released (or its context ends), then succeeds, or
// fails when told to.
struct gatherers {
  fan_in rule = fan_in::all();
  std::array<std::atomic<bool>, 3> release{};
  std::array<std::atomic<bool>, 3> fail{};
  std::atomic<int> working{0};
  std::atomic<int> runs{0};
  std::mutex mu;
  std::vector<std::string> children;

  void setup(http_server& s) {
    handler_options quick;
    quick.min_budget = 100ms;
    s.add_handler(
        "gather",
        [this, &s](const context& ctx, const request_view& req) {
          ++runs;
          if (req.woke_by.empty()) {
            for (int i = 0; i < 3; ++i) {
              const child_answer a = s.enqueue_child(ctx, req, {.handler = "work", .body = std::to_string(i)});
              std::lock_guard lock(mu);
              children.push_back(a.id);
            }
            return handler_result::wait_for(rule);
          }
          std::string out(req.woke_by);
          for (const child_outcome& c : req.children) out += " " + c.state + (c.ok() ? "=" + c.result : "");
          return handler_result{out, "text/plain"};
        },
        quick);
    s.add_handler(
        "work",
        [this](const context& ctx, const request_view& req) {
          const int i = std::stoi(std::string(req.body));
          ++working;
          while (!release[i].load() && !ctx.done()) std::this_thread::sleep_for(1ms);
          --working;
          ctx.check();
          if (fail[i].load()) throw handler_error(500, "failed", "child " + std::to_string(i) + " failed");
          return handler_result{"r" + std::to_string(i), "text/plain"};
        },
        quick);
    s.add_handler("sync_wait", [](const context&, const request_view&) { return handler_result::wait_for(); });
  }
  std::vector<std::string> sent() {
    std::lock_guard lock(mu);
    return children;
  }
};

}  // namespace hourglass::server::testing
