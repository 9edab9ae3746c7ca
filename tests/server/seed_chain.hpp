// The seeds' worked example as handlers, for the memory and fleet tests:
// a gateway -> service -> model chain of child jobs, each hop waiting for
// its child without holding a worker; the model hangs; the service tries it
// twice, each attempt asking `attempt`, then answers with a fallback.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "hourglass/server/http_server.hpp"

namespace hourglass::server::testing {

using namespace std::chrono_literals;

struct chain {
  duration user_deadline = 12s;  // the gateway's ask of the service
  duration attempt = 10s;        // each model attempt's ask
  duration model_minimum = 100ms;
  duration service_keep{};  // what the service keeps to answer once its wait ends (zero: its 100 ms minimum)
  std::mutex mu;
  std::vector<child_answer> model_attempts;
  std::atomic<int> models_running{0};

  void setup(http_server& s) {
    handler_options hop;
    hop.min_budget = 100ms;  // each hop keeps 100 ms to answer once its wait ends
    s.add_handler(
        "gateway",
        [this, &s](const context& ctx, const request_view& req) {
          if (req.woke_by.empty()) {
            (void)s.enqueue_child(ctx, req, {.handler = "service", .deadline = user_deadline});
            return handler_result::wait_for(fan_in::all());
          }
          const child_outcome& service = req.children.front();
          return handler_result{service.ok() ? service.result : "gateway fallback", "text/plain"};
        },
        hop);
    s.add_handler(
        "service",
        [this, &s](const context& ctx, const request_view& req) {
          if (!req.children.empty() && req.children.back().ok()) {
            return handler_result{req.children.back().result, "text/plain"};
          }
          if (req.children.size() < 2 && req.woke_by != "deadline") {  // up to 2 attempts, each asking `attempt`
            const child_answer a = s.enqueue_child(ctx, req, {.handler = "model", .deadline = attempt});
            {
              std::lock_guard lock(mu);
              model_attempts.push_back(a);
            }
            if (a.verdict == child_answer::kind::accepted) {
              fan_in all = fan_in::all();
              all.keep = service_keep;
              return handler_result::wait_for(all);
            }
          }
          return handler_result{"fallback: the model did not answer in time", "text/plain"};
        },
        hop);
    handler_options model;
    model.min_budget = model_minimum;
    s.add_handler(
        "model",
        [this](const context& ctx, const request_view&) {
          ++models_running;
          ctx.sleep_until(never);  // hangs: only its deadline (or a cancel) ends it
          --models_running;
          ctx.check();
          return handler_result{"never", "text/plain"};
        },
        model);
  }
  std::vector<child_answer> attempts() {
    std::lock_guard lock(mu);
    return model_attempts;
  }
};

}  // namespace hourglass::server::testing
