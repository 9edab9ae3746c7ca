// Budgets carried across hops: each hop forwards what it has left minus its
// reserve, rounded down; a deadline aborts the whole chain.
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

constexpr auto reserve = std::chrono::milliseconds(20);

// hops[0] is called by the test; hops[i] may call hops[i+1] as upstream "next".
std::vector<std::unique_ptr<test_server>> make_chain(std::size_t n) {
  std::vector<std::unique_ptr<test_server>> hops(n);
  for (std::size_t i = n; i-- > 0;) {
    server_options o = test_options();
    o.call_reserve = reserve;
    if (i + 1 < n) o.upstreams["next"] = hops[i + 1]->url();
    hops[i] = std::make_unique<test_server>(o, [](http_server& s) { s.add_handler("report", report_handler()); });
  }
  return hops;
}

// A call body that goes through `calls` more hops and ends at `last` with `body`.
std::string nested_call(std::size_t calls, const std::string& last, const std::string& body) {
  std::string inner = body;
  for (std::size_t i = 0; i < calls; ++i) {
    const std::string handler = i == 0 ? last : "call";
    inner = R"({"upstream": "next", "handler": ")" + handler + R"(", "body": )" + inner + "}";
  }
  return inner;
}

void expect_budget_shrinks_along(std::size_t hops) {
  auto chain = make_chain(hops);
  const std::string trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const reply r = post(chain[0]->port(), "/v1/jobs/call", nested_call(hops - 1, "report", R"("hi")"),
                       {{"Request-Timeout", "2S"}, {"traceparent", trace}});
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.status, 200u) << r.body;
  const double received = json_number(r.body, "budget_ms");
  const double calls = static_cast<double>(hops - 1);
  // Never more than the first hop had, minus one reserve per call...
  EXPECT_LE(received, 2000.0 - calls * 20.0);
  // ...and no less than that minus the time the whole chain took.
  EXPECT_GE(received, 2000.0 - calls * 20.0 - r.elapsed_ms());
  EXPECT_EQ(json_string(r.body, "traceparent"), trace) << "traceparent is passed on unchanged";
  EXPECT_FALSE(json_string(r.body, "request_timeout").empty());
  EXPECT_EQ(json_string(r.body, "body"), "hi");
}

TEST(HttpServerChain, TwoHopsForwardTheRemainingBudget) { expect_budget_shrinks_along(2); }
TEST(HttpServerChain, ThreeHopsForwardTheRemainingBudget) { expect_budget_shrinks_along(3); }

TEST(HttpServerChain, ADeadlineAbortsTheWholeChainAndNothingCompletesLate) {
  auto chain = make_chain(3);
  const reply r = post(chain[0]->port(), "/v1/jobs/call", nested_call(2, "sleep", R"({"ms": 10000})"),
                       {{"Request-Timeout", "200m"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 504u) << r.body;
  EXPECT_EQ(json_string(r.body, "error"), "deadline_exceeded");
  EXPECT_LT(r.elapsed_ms(), 200 + 500) << "the client gets its answer within its budget plus slack";

  // The last hop's job was stopped (by its own deadline or by its caller
  // going away), never finished ok, and wasted nothing.
  test_server& last = *chain[2];
  ASSERT_TRUE(wait_until([&] {
    const auto h = last.handler("sleep");
    return h.finished_deadline_exceeded + h.finished_cancelled == 1;
  }));
  const auto h = last.handler("sleep");
  EXPECT_EQ(h.finished_ok, 0u);
  EXPECT_EQ(h.completed_late, 0u);
  EXPECT_EQ(last.metrics().workers_busy, 0);
  // The calling hops' jobs counted (ended), so none can still be counted late.
  for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
    EXPECT_TRUE(wait_until([&] {
      const auto c = chain[i]->handler("call");
      return c.finished_ok + c.finished_error + c.finished_deadline_exceeded + c.finished_cancelled == 1u;
    })) << "hop "
        << i;
    EXPECT_EQ(chain[i]->handler("call").completed_late, 0u) << "hop " << i;
  }
}

TEST(HttpServerChain, TooLittleBudgetLeftMeansTheCallIsNotMade) {
  server_options bo = test_options();
  test_server b(bo);
  server_options ao = test_options();
  ao.call_reserve = std::chrono::milliseconds(500);  // more than the whole budget
  ao.upstreams["next"] = b.url();
  test_server a(ao);
  const reply r = post(a.port(), "/v1/jobs/call", R"({"upstream": "next", "handler": "echo", "body": "x"})",
                       {{"Request-Timeout", "300m"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 504u);
  EXPECT_LT(r.elapsed_ms(), 250) << "refused at once, not at the deadline";
  EXPECT_EQ(b.handler("echo").admitted, 0u);
}

TEST(HttpServerChain, OnlyConfiguredUpstreamsCanBeCalled) {
  test_server srv;
  const reply r = post(srv.port(), "/v1/jobs/call",
                       R"({"upstream": "http://127.0.0.1:1", "handler": "echo", "body": "x"})");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(json_string(r.body, "error"), "invalid_argument");
}

TEST(HttpServerChain, ConnectionsToUpstreamsAreReused) {
  auto chain = make_chain(2);
  std::set<std::string> callers;
  for (int i = 0; i < 5; ++i) {
    const reply r = post(chain[0]->port(), "/v1/jobs/call",
                         R"({"upstream": "next", "handler": "report", "body": "x"})");
    ASSERT_EQ(r.status, 200u) << r.body;
    callers.insert(json_string(r.body, "remote"));
  }
  // Five sequential calls, one pooled keep-alive connection: the upstream saw one peer address.
  EXPECT_EQ(callers.size(), 1u);
  EXPECT_EQ(chain[1]->handler("report").finished_ok, 5u);
}

}  // namespace
}  // namespace hourglass::server::testing
