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
#include "hourglass/support/json.hpp"
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

// With --max-children 2 and --max-job-depth 2, on the daemon at `port`:
// Job-Parent past either bound is refused with a 409 naming it, nothing is
// held, and a DELETE of the root ends the whole family. Every job is
// delayed an hour: held, never run.
inline void family_bounds_hold(std::uint16_t port) {
  const auto enqueue = [&](const std::string& parent) {
    headers h{{"Prefer", "respond-async"}, {"Job-Delay", "1H"}};
    if (!parent.empty()) h.emplace_back("Job-Parent", parent);
    return post(port, "/v1/jobs/echo", "x", h);
  };
  const reply root = enqueue("");
  ASSERT_EQ(root.status, 202u) << root.body;
  const std::string root_id = json_string(root.body, "id");
  std::vector<std::string> children;
  for (int i = 0; i < 2; ++i) {
    const reply r = enqueue(root_id);
    ASSERT_EQ(r.status, 202u) << r.body;
    children.push_back(json_string(r.body, "id"));
  }
  const reply third = enqueue(root_id);
  EXPECT_EQ(third.status, 409u) << third.body;
  EXPECT_EQ(json_string(third.body, "error"), "too_many_children") << third.body;
  const reply grandchild = enqueue(children[0]);
  ASSERT_EQ(grandchild.status, 202u) << "depth 2 is allowed: " << grandchild.body;
  const reply deeper = enqueue(json_string(grandchild.body, "id"));
  EXPECT_EQ(deeper.status, 409u) << deeper.body;
  EXPECT_EQ(json_string(deeper.body, "error"), "too_deep") << deeper.body;
  const auto listed = support::parse_json(get(port, "/v1/jobs/" + root_id).body);
  ASSERT_TRUE(listed && listed->is_object());
  EXPECT_EQ(listed->at("children").as_array().size(), 2u) << "the refused child is not held: " << *listed;
  client c(port);
  const reply cancelled = c.request("DELETE", "/v1/jobs/" + root_id);
  EXPECT_EQ(cancelled.status, 200u) << cancelled.body;
  EXPECT_TRUE(wait_until([&] {
    return json_string(get(port, "/v1/jobs/" + json_string(grandchild.body, "id")).body, "state") == "cancelled";
  })) << "the cancel reaches the deepest";
  // No run ends a scheduled job: the daemon whose cancel ended them counts
  // each, the root and its three descendants.
  EXPECT_EQ(
      metric_value(get(port, "/metrics").body, R"(hourglass_jobs_finished_total{handler="echo",outcome="cancelled"})"),
      4.0);
}

}  // namespace hourglass::server::testing
