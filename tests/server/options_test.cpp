#include "hourglass/server/options.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "hourglass/server/handler.hpp"

namespace hourglass::server {
namespace {

TEST(Options, ParseListen) {
  auto ep = parse_listen("127.0.0.1:8080");
  EXPECT_EQ(ep.address, "127.0.0.1");
  EXPECT_EQ(ep.port, 8080);
  EXPECT_TRUE(ep.loopback);
  ep = parse_listen("[::1]:0");
  EXPECT_EQ(ep.address, "::1");
  EXPECT_TRUE(ep.loopback);
  EXPECT_FALSE(parse_listen("0.0.0.0:1").loopback);
  EXPECT_FALSE(parse_listen("10.1.2.3:1").loopback);
  for (const char* bad :
       {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "host:80", "::1:80", "[::1]80", "1.2.3.4:-1"}) {
    EXPECT_THROW(parse_listen(bad), std::invalid_argument) << bad;
  }
}

TEST(Options, ParseUpstreamUrl) {
  auto u = parse_upstream_url("http://127.0.0.1:8081");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, "8081");
  EXPECT_EQ(u.prefix, "");
  u = parse_upstream_url("http://search.internal/api/");
  EXPECT_EQ(u.host, "search.internal");
  EXPECT_EQ(u.port, "80");
  EXPECT_EQ(u.prefix, "/api");
  u = parse_upstream_url("http://[::1]:9/x");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.prefix, "/x");
  for (const char* bad : {"https://a:1", "ftp://a", "http://", "http://user:pw@a:1", "http://a:99999", "http://a:1/x?y",
                          "http://a b:1"}) {
    EXPECT_THROW(parse_upstream_url(bad), std::invalid_argument) << bad;
  }
}

TEST(Options, HandlerNames) {
  EXPECT_TRUE(valid_handler_name("echo"));
  EXPECT_TRUE(valid_handler_name("resize.v2_fast-1"));
  EXPECT_FALSE(valid_handler_name(""));
  EXPECT_FALSE(valid_handler_name("a/b"));
  EXPECT_FALSE(valid_handler_name("a b"));
  EXPECT_FALSE(valid_handler_name(std::string(65, 'a')));
}

TEST(Options, ValidateRejectsNonsense) {
  server_options o;
  EXPECT_NO_THROW(validate(o));
  auto bad = [&](auto change) {
    server_options c;
    change(c);
    EXPECT_THROW(validate(c), std::invalid_argument);
  };
  bad([](server_options& c) { c.queue_capacity = 0; });
  bad([](server_options& c) { c.io_threads = 0; });
  bad([](server_options& c) { c.workers = 0; });
  bad([](server_options& c) { c.default_budget = duration::zero(); });
  bad([](server_options& c) { c.min_budget = c.max_budget; });
  bad([](server_options& c) { c.default_budget = c.max_budget + duration(1); });
  bad([](server_options& c) { c.listen = "0.0.0.0:1"; });
  bad([](server_options& c) { c.upstreams["bad name"] = "http://a:1"; });
  bad([](server_options& c) { c.log_level = "loud"; });
  bad([](server_options& c) { c.metrics_cache = -std::chrono::milliseconds(1); });
}

// options.hpp promises that zero workers is refused, and says so by name.
TEST(Options, ValidateRefusesZeroWorkers) {
  server_options o;
  EXPECT_GE(o.workers, 1u);  // the default is one per CPU, never 0
  o.workers = 0;
  try {
    validate(o);
    FAIL() << "zero workers accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--workers"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hourglass::server
