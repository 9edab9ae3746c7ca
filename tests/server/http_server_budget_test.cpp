// Budget headers: the accept/reject table, tightest-of-several, default and
// clamp, and the budget counted from the arrival of the headers.
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

server_options budget_options() {
  server_options o = test_options();
  o.default_budget = std::chrono::seconds(3);
  o.max_budget = std::chrono::seconds(20);
  return o;
}

class HttpServerBudget : public ::testing::Test {
 protected:
  HttpServerBudget() : srv_(budget_options(), [](http_server& s) { s.add_handler("report", report_handler()); }) {}

  // The budget the handler saw, or a negative number with the HTTP status.
  double budget_for(const headers& hs, unsigned* status = nullptr) {
    const reply r = conn_.post("/v1/jobs/report", "", hs);
    EXPECT_TRUE(r.ok) << r.error;
    if (status != nullptr) *status = r.status;
    return r.status == 200 ? json_number(r.body, "budget_ms") : -1.0;
  }

  test_server srv_;
  client conn_{srv_.port()};
};

struct accepted_case {
  const char* header;
  const char* value;
  double budget_ms;
};

TEST_F(HttpServerBudget, AcceptedHeaderValues) {
  const accepted_case cases[] = {
      {"Request-Timeout", "800m", 800},
      {"Request-Timeout", "2S", 2000},
      // Sub-millisecond units with real-time slack: a 1.5 ms request over real
      // HTTP fails on a loaded machine; the codec tests cover "1500u" exactly.
      {"Request-Timeout", "1500000u", 1500},
      {"Request-Timeout", "99999999n", 99.999999},  // the most nanoseconds 8 digits hold
      {"Request-Timeout", "1M", 20000},
      {"Request-Timeout", "1H", 20000},  // clamped to --max-budget
      {"Request-Timeout", "00000001S", 1000},
      {"Request-Timeout", "99999999m", 20000},
      {"grpc-timeout", "700m", 700},
      {"GRPC-TIMEOUT", "5S", 5000},  // names are case-insensitive
      {"X-Envoy-Expected-Rq-Timeout-Ms", "250", 250},
      {"x-envoy-expected-rq-timeout-ms", "000000000420", 420},
      {"Connect-Timeout-Ms", "350", 350},
      {"connect-timeout-ms", "0000000450", 450},
  };
  for (const auto& c : cases) {
    unsigned status = 0;
    EXPECT_NEAR(budget_for({{c.header, c.value}}, &status), c.budget_ms, 0.001) << c.header << ": " << c.value;
    EXPECT_EQ(status, 200u) << c.header << ": " << c.value;
  }
}

TEST_F(HttpServerBudget, RejectedHeaderValuesAre400InvalidTimeoutAndNothingIsQueued) {
  const std::pair<const char*, const char*> cases[] = {
      {"Request-Timeout", ""},
      {"Request-Timeout", "1.5S"},
      {"Request-Timeout", "-1S"},
      {"Request-Timeout", "1s"},
      {"Request-Timeout", "123456789S"},
      {"Request-Timeout", "S"},
      {"Request-Timeout", "10"},
      {"Request-Timeout", "1SS"},
      {"Request-Timeout", "0x10S"},
      {"Request-Timeout", "1 S"},
      {"Request-Timeout", "+1S"},
      {"Request-Timeout", "2025-01-01T00:00:00Z"},
      {"grpc-timeout", "1ms"},
      {"grpc-timeout", "abc"},
      {"X-Envoy-Expected-Rq-Timeout-Ms", "1.5"},
      {"X-Envoy-Expected-Rq-Timeout-Ms", "-5"},
      {"X-Envoy-Expected-Rq-Timeout-Ms", "250ms"},
      {"X-Envoy-Expected-Rq-Timeout-Ms", "1234567890123"},
      {"Connect-Timeout-Ms", "0"},
      {"Connect-Timeout-Ms", "12345678901"},
      {"Connect-Timeout-Ms", "250ms"},
  };
  const auto before = srv_.handler("report").admitted;
  int n = 0;
  for (const auto& [h, v] : cases) {
    const reply r = conn_.post("/v1/jobs/report", "", {{h, v}});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 400u) << h << ": '" << v << "'";
    EXPECT_EQ(json_string(r.body, "error"), "invalid_timeout") << h << ": '" << v << "'";
    EXPECT_EQ(json_string(r.body, "outcome"), "invalid") << h << ": '" << v << "'";
    EXPECT_FALSE(r.header("server-timing").empty());
    ++n;
  }
  const auto h = srv_.handler("report");
  EXPECT_EQ(h.admitted, before);
  EXPECT_EQ(h.rejected_invalid_timeout, static_cast<std::uint64_t>(n));
}

TEST_F(HttpServerBudget, OneMalformedHeaderSpoilsTheWholeRequest) {
  unsigned status = 0;
  budget_for({{"Request-Timeout", "1S"}, {"grpc-timeout", "soon"}}, &status);
  EXPECT_EQ(status, 400u);
  budget_for({{"Request-Timeout", "1S"}, {"Request-Timeout", "2S"}}, &status);
  EXPECT_EQ(status, 400u) << "a repeated budget header is refused";
}

TEST_F(HttpServerBudget, TheTightestHeaderWins) {
  EXPECT_NEAR(
      budget_for({{"Request-Timeout", "5S"}, {"grpc-timeout", "300m"}, {"X-Envoy-Expected-Rq-Timeout-Ms", "1000"}}),
      300, 0.001);
  EXPECT_NEAR(budget_for({{"Request-Timeout", "900m"}, {"X-Envoy-Expected-Rq-Timeout-Ms", "1000"}}), 900, 0.001);
  EXPECT_NEAR(budget_for({{"grpc-timeout", "2S"}, {"X-Envoy-Expected-Rq-Timeout-Ms", "120"}}), 120, 0.001);
}

TEST_F(HttpServerBudget, NoHeaderGetsTheDefaultAndLargeBudgetsAreClamped) {
  EXPECT_NEAR(budget_for({}), 3000, 0.001);
  EXPECT_NEAR(budget_for({{"Request-Timeout", "30S"}}), 20000, 0.001);
  EXPECT_NEAR(budget_for({{"X-Envoy-Expected-Rq-Timeout-Ms", "999999999999"}}), 20000, 0.001);
}

TEST_F(HttpServerBudget, AsyncJobFreshnessIsValidatedToo) {
  const reply r = conn_.post("/v1/jobs/report", "", {{"Prefer", "respond-async"}, {"Job-Freshness", "soon"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(json_string(r.body, "error"), "invalid_timeout");
}

TEST(HttpServerBudgetUnknown, InvalidTimeoutsOfUnknownHandlersAre404AndNotCounted) {
  test_server srv;
  const reply r = post(srv.port(), "/v1/jobs/nope", "", {{"Request-Timeout", "bad"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(srv.metrics().find("nope"), nullptr);
}

}  // namespace
}  // namespace hourglass::server::testing
