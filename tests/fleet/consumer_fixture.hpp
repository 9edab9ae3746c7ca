// The consumer tests' fixture: a real redis-server, a real executor, a
// runner that records what ran, and jobs written with explicit stream ids
// (the broker's time of enqueue), so their ages are exact without waiting.
// consumer_test.cpp runs on the real clock; consumer_clock_test.cpp moves
// the daemon's side of time (renewals, fencing, reclaim pacing, drain) to a
// manual_clock.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/eventually.hpp"
#include "hourglass/fleet/consumer.hpp"
#include "job_hash.hpp"
#include "redis_server.hpp"

namespace hourglass::fleet::testing {

using namespace std::chrono_literals;
using test_common::eventually;

// Records what ran; "block" jobs wait for release() or their context.
struct recording_runner {
  std::mutex mu;
  std::vector<delivered_job> seen;
  std::atomic<bool> released{false};
  std::atomic<int> running{0};

  job_runner get() {
    return {.run = [this](const context& ctx, const delivered_job& j) {
      {
        std::lock_guard lock(mu);
        seen.push_back(j);
      }
      if (j.handler == "block" || j.handler == "stubborn") {
        ++running;
        while (!released.load() && (j.handler == "stubborn" || !ctx.done())) std::this_thread::sleep_for(1ms);
        --running;
        ctx.check();
      }
      if (j.handler == "fail") throw std::runtime_error("it broke");
      return job_output{"ran:" + j.payload, "text/plain"};
    }};
  }
  std::vector<std::string> ids() {
    std::lock_guard lock(mu);
    std::vector<std::string> out;
    for (const auto& j : seen) out.push_back(j.id);
    return out;
  }
  std::optional<delivered_job> find(const std::string& id) {
    std::lock_guard lock(mu);
    for (const auto& j : seen) {
      if (j.id == id) return j;
    }
    return std::nullopt;
  }
};

struct Consumer : ::testing::Test {
  Consumer() { queue.ensure_group(context()); }

  redis_reply raw(std::vector<std::string> args) { return inspect.call(context(), std::move(args)); }
  long long broker_ms() {
    const redis_reply t = raw({"TIME"});
    return std::stoll(t.elements[0].str) * 1000 + std::stoll(t.elements[1].str) / 1000;
  }
  // A job as enqueue writes it, added at broker time `added_ms` (its entry
  // id), so its age is exact. Entry ids must grow: pass growing times.
  struct added {
    std::string id;
    std::string entry;
  };
  added add_job(const std::string& handler, long long added_ms, std::optional<duration> freshness = std::nullopt,
                const std::string& payload = "p") {
    added a{new_job_id(), std::to_string(added_ms) + "-0"};
    const std::string f =
        freshness ? std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(*freshness).count()) : "-1";
    const redis_reply r = raw({"XADD", queue.key("stream"), a.entry, "id", a.id, "handler", handler, "freshness_ms", f,
                               "min_budget_ms", "0"});
    EXPECT_EQ(r.str, a.entry) << r.str;
    raw(job_hash(queue.key("job:" + a.id))
            .enqueued(a.id, handler, payload, a.entry, f)
            .state(job_state::queued)
            .set(job_field::deliveries, 0));
    return a;
  }
  // Delivers the next entries to `name` (a daemon that then dies holding them), idle for long.
  void deliver_to(const std::string& name, int count, bool idle_long = true) {
    const redis_reply r = raw({"XREADGROUP", "GROUP", std::string(job_queue::group), name, "COUNT",
                               std::to_string(count), "STREAMS", queue.key("stream"), ">"});
    ASSERT_TRUE(r.is_array()) << r.str;
    if (!idle_long) return;
    for (const auto& e : r.elements[0].elements[1].elements) {
      raw({"XCLAIM", queue.key("stream"), std::string(job_queue::group), name, "0", e.elements[0].str, "IDLE", "100000",
           "JUSTID"});
    }
  }
  std::string state(const std::string& id) {
    const auto j = queue.find(context(), id);
    return j ? std::string(j->state) : "";
  }
  // A field of the job's hash as the scripts wrote it ("" absent).
  std::string field(const std::string& id, const std::string& f) {
    const redis_reply r = raw({"HGET", queue.key("job:" + id), f});
    return r.is_nil() ? "" : r.str;
  }
  long long xlen() { return raw({"XLEN", queue.key("stream")}).integer; }
  long long pending() {
    return raw({"XPENDING", queue.key("stream"), std::string(job_queue::group)}).elements[0].integer;
  }

  consumer_options named(std::string name, std::size_t slots = 2) {
    consumer_options o;
    o.name = std::move(name);
    o.slots = slots;
    o.lease = 600ms;  // renewals every 200 ms
    o.read_block = 50ms;
    return o;
  }

  redis_server server;
  io_thread io;
  redis_connection commands{io.io, server.endpoint()};
  redis_connection reads{io.io, server.endpoint()};
  redis_connection inspect{io.io, server.endpoint()};
  job_queue queue{commands, {}};
  recording_runner runner;
  executor jobs{executor_options{.workers = 2}};
};

}  // namespace hourglass::fleet::testing
