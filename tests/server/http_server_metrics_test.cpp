// GET /metrics over HTTP: the page kept for --metrics-cache on the server's
// clock (a manual one here, so every interval is exact), and the whole page's
// form. The cache itself, threads included: metrics_page_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

#include "hourglass/clock.hpp"
#include "hourglass/server/http_server.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

const std::string admitted_echo = R"(hourglass_jobs_admitted_total{handler="echo"})";

server_options cached_for(duration interval) {
  server_options o = test_options();
  o.metrics_cache = interval;
  return o;
}

void echo_once(client& c, test_server& srv, std::uint64_t admitted_after) {
  ASSERT_EQ(c.post("/v1/jobs/echo", "x").status, 200u);
  ASSERT_EQ(srv.handler("echo").admitted, admitted_after) << "the registry's counter moved";
}

TEST(HttpServerMetrics, AScrapeWithinTheIntervalGetsTheSameBytes) {
  manual_clock clk;
  test_server srv(cached_for(1s), {}, clk);
  client c(srv.port());
  const reply first = c.get("/metrics");
  ASSERT_EQ(first.status, 200u);
  EXPECT_EQ(first.header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(metric_value(first.body, admitted_echo), 0.0);

  echo_once(c, srv, 1);
  EXPECT_EQ(c.get("/metrics").body, first.body) << "the counter moved; the page is the one kept";
  clk.advance(999ms);
  EXPECT_EQ(c.get("/metrics").body, first.body) << "1 ms before the interval is over";
  clk.advance(1ms);
  const reply fresh = c.get("/metrics");
  EXPECT_EQ(metric_value(fresh.body, admitted_echo), 1.0) << "at the interval: rendered anew";

  echo_once(c, srv, 2);
  clk.advance(500ms);
  EXPECT_EQ(c.get("/metrics").body, fresh.body) << "the interval counts from the last rendering";
  clk.advance(500ms);
  EXPECT_EQ(metric_value(c.get("/metrics").body, admitted_echo), 2.0);
}

TEST(HttpServerMetrics, AnIntervalOfZeroRendersEveryScrape) {
  manual_clock clk;
  test_server srv(cached_for(duration::zero()), {}, clk);
  client c(srv.port());
  EXPECT_EQ(metric_value(c.get("/metrics").body, admitted_echo), 0.0);
  echo_once(c, srv, 1);
  EXPECT_EQ(metric_value(c.get("/metrics").body, admitted_echo), 1.0) << "time did not move";
  echo_once(c, srv, 2);
  EXPECT_EQ(metric_value(c.get("/metrics").body, admitted_echo), 2.0);
}

// The name of a sample line's series: up to its labels or its value.
std::string series_of(const std::string& line) { return line.substr(0, line.find_first_of("{ ")); }

// The whole page, every part's families together, in the form `promtool
// check metrics` wants: each family once, HELP then TYPE then its samples
// only, a counter's name ending in _total, every value a number.
TEST(HttpServerMetrics, TheWholePageIsOneWellFormedExposition) {
  server_options o = test_options();
  o.upstreams = {{"up", "http://127.0.0.1:1"}};
  test_server srv(o);
  client c(srv.port());
  echo_once(c, srv, 1);
  const std::string page = c.get("/metrics").body;
  ASSERT_FALSE(page.empty());
  ASSERT_EQ(page.back(), '\n');

  std::set<std::string> families;
  std::string family, type;
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    SCOPED_TRACE(line);
    if (line.rfind("# HELP ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
      type.clear();
      EXPECT_TRUE(families.insert(family).second) << "family written twice";
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      EXPECT_EQ(rest.substr(0, rest.find(' ')), family) << "TYPE right after its HELP";
      type = rest.substr(rest.find(' ') + 1);
      EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << type;
      if (type == "counter") {
        EXPECT_TRUE(family.ends_with("_total"));
      }
      continue;
    }
    ASSERT_FALSE(type.empty()) << "a sample before its family's TYPE";
    const std::string series = series_of(line);
    if (type == "histogram") {
      EXPECT_TRUE(series == family + "_bucket" || series == family + "_sum" || series == family + "_count");
    } else {
      EXPECT_EQ(series, family) << "a sample outside its family";
    }
    const std::string value = line.substr(line.rfind(' ') + 1);
    char* end = nullptr;
    (void)std::strtod(value.c_str(), &end);
    EXPECT_TRUE(end != value.c_str() && *end == '\0') << "not a number: " << value;
  }
  // Every part of the page is there: the registry, the memory store, the
  // upstreams, the connections.
  for (const char* f : {"hourglass_jobs_admitted_total", "hourglass_workers_busy", "hourglass_async_jobs_stored",
                        "hourglass_circuit_state", "hourglass_circuit_rejected_total", "hourglass_hedges_total",
                        "hourglass_http_connections_open", "hourglass_http_connections_limit"}) {
    EXPECT_TRUE(families.count(f) == 1) << f;
  }
  EXPECT_EQ(metric_value(page, R"(hourglass_circuit_state{upstream="up"})"), 0.0);
  EXPECT_EQ(metric_value(page, "hourglass_http_connections_open"), 1.0);
  EXPECT_EQ(metric_value(page, "hourglass_http_connections_limit"), static_cast<double>(o.max_connections));
}

}  // namespace
}  // namespace hourglass::server::testing
