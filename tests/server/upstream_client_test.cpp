#include "hourglass/server/upstream_client.hpp"

#include <gtest/gtest.h>

#include <future>
#include <stdexcept>

#include "hourglass/budget_codec.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

class UpstreamClient : public ::testing::Test {
 protected:
  UpstreamClient()
      : target_(test_options(), [](http_server& s) { s.add_handler("report", report_handler()); }), caller_([&] {
          server_options o = test_options();
          o.upstreams["t"] = target_.url();
          o.call_reserve = std::chrono::milliseconds(30);
          return o;
        }()) {}

  upstream_client& client() { return caller_.get().upstreams(); }

  test_server target_;
  test_server caller_;
};

TEST_F(UpstreamClient, SendsTheRemainingBudgetMinusTheReserveRoundedDown) {
  context_source ctx(real_clock(), real_clock().now() + std::chrono::milliseconds(800));
  const auto before = ctx.get().remaining();
  const auto res = client().post_job(ctx.get(), "t", "report", "", "", "00-abc-def-01");
  ASSERT_EQ(res.status, 200u) << res.body;
  const std::string sent = json_string(res.body, "request_timeout");
  const auto parsed = parse_grpc_timeout(sent);
  ASSERT_TRUE(parsed) << sent;
  EXPECT_LE(*parsed, before - std::chrono::milliseconds(30));
  EXPECT_GT(*parsed, before - std::chrono::milliseconds(30) - std::chrono::milliseconds(300));
  EXPECT_EQ(json_string(res.body, "traceparent"), "00-abc-def-01");
}

TEST_F(UpstreamClient, WithoutADeadlineNoBudgetHeaderIsSent) {
  const auto res = client().post_job(context(), "t", "report", "", "", "");
  ASSERT_EQ(res.status, 200u);
  EXPECT_EQ(json_string(res.body, "request_timeout"), "");
}

TEST_F(UpstreamClient, ABudgetBelowTheReserveIsNotSent) {
  context_source ctx(real_clock(), real_clock().now() + std::chrono::milliseconds(20));
  try {
    client().post_job(ctx.get(), "t", "report", "", "", "");
    ADD_FAILURE() << "the call was made";
  } catch (const stopped_error& e) {
    EXPECT_EQ(e.why().code, outcome::deadline_exceeded);
  }
  EXPECT_EQ(target_.handler("report").admitted, 0u);
}

TEST_F(UpstreamClient, UnknownUpstreamsAndBadHandlerNamesAreRefused) {
  EXPECT_THROW(client().post_job(context(), "elsewhere", "report", "", "", ""), std::invalid_argument);
  EXPECT_THROW(client().post_job(context(), "t", "../admin", "", "", ""), std::invalid_argument);
  EXPECT_FALSE(client().has("elsewhere"));
  EXPECT_TRUE(client().has("t"));
}

TEST_F(UpstreamClient, CancellingTheContextAbortsTheRequestInFlight) {
  context_source ctx(real_clock(), real_clock().now() + std::chrono::seconds(30));
  auto call = std::async(std::launch::async, [&] {
    try {
      client().post_job(ctx.get(), "t", "sleep", R"({"ms": 10000})", "application/json", "");
      return status::ok();
    } catch (const stopped_error& e) {
      return e.why();
    }
  });
  ASSERT_TRUE(wait_until([&] { return target_.metrics().workers_busy == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  ctx.cancel(cancel_cause::caller_gone);
  ASSERT_EQ(call.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500)) << "aborted, not waited for";
  EXPECT_EQ(call.get(), status::cancelled(cancel_cause::caller_gone));
  // The callee saw its caller go and cancelled its own job.
  ASSERT_TRUE(wait_until([&] { return target_.handler("sleep").finished_cancelled == 1; }));
}

TEST_F(UpstreamClient, AnUnreachableUpstreamIsAnError) {
  server_options o = test_options();
  o.upstreams["gone"] = "http://127.0.0.1:1";
  test_server srv(o);
  EXPECT_THROW(srv.get().upstreams().post_job(context(), "gone", "echo", "", "", ""), std::runtime_error);
}

TEST_F(UpstreamClient, AConnectionClosedByThePeerWhileIdleIsReplaced) {
  // The callee closes idle keep-alive connections quickly; the pool must notice.
  server_options to = test_options();
  to.idle_timeout = std::chrono::milliseconds(50);
  test_server quick(to);
  server_options co = test_options();
  co.upstreams["q"] = quick.url();
  test_server caller(co);
  auto& c = caller.get().upstreams();
  EXPECT_EQ(c.post_job(context(), "q", "echo", "1", "", "").body, "1");
  // The callee hangs up the pooled connection: only the metrics request's own stays open.
  ASSERT_TRUE(wait_until([&] {
    return metric_value(get(quick.port(), "/metrics").body, "hourglass_http_connections_open") == 1;
  })) << "the callee never closed the idle connection";
  EXPECT_EQ(c.post_job(context(), "q", "echo", "2", "", "").body, "2");
}

}  // namespace
}  // namespace hourglass::server::testing
