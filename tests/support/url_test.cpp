#include "hourglass/support/url.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace hourglass::support {
namespace {

struct url_case {
  const char* text;
  const char* host;
  std::uint16_t port;
  const char* path;
  const char* host_header;
};

TEST(HttpUrl, HostPortPathAndHostHeader) {
  for (const url_case& c : {
           url_case{"http://127.0.0.1:8081", "127.0.0.1", 8081, "", "127.0.0.1:8081"},
           url_case{"http://search.internal/api/", "search.internal", 80, "/api/", "search.internal"},
           url_case{"http://a:080/", "a", 80, "/", "a"},
           // What the bench is pointed at: the old lenient parser split this at the last ':' of "[::1]".
           url_case{"http://[::1]:8080/v1/jobs/echo", "::1", 8080, "/v1/jobs/echo", "[::1]:8080"},
           url_case{"http://[::1]/", "::1", 80, "/", "[::1]"},
       }) {
    const http_url u = parse_http_url(c.text);
    EXPECT_EQ(u.host, c.host) << c.text;
    EXPECT_EQ(u.port, c.port) << c.text;
    EXPECT_EQ(u.path, c.path) << c.text;
    EXPECT_EQ(u.host_header, c.host_header) << c.text;
  }
}

TEST(HttpUrl, RejectsWhatWeDoNotSpeak) {
  for (const char* bad :
       {"", "https://a:1", "ftp://a", "HTTP//a", "http://", "http:///x", "http://user:pw@a:1", "http://@a",
        "http://a:99999", "http://a:", "http://a:x", "http://a:1/x?y", "http://a/x#f", "http://a b:1", "http://a_b",
        "http://[::1", "http://[v1.x]/", "http://::1:80", "http://a/%zz"}) {
    EXPECT_THROW(parse_http_url(bad), std::invalid_argument) << bad;
  }
}

TEST(HttpUrl, MessagesNameWhatAndQuoteTheText) {
  try {
    parse_http_url("https://a:1", "upstream URL");
    FAIL() << "accepted https";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "upstream URL must start with http:// (no TLS), got 'https://a:1'");
  }
  try {
    parse_http_url("http://u@a", "upstream URL");
    FAIL() << "accepted credentials";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "upstream URL must not carry credentials: 'http://u@a'");
  }
}

TEST(RedisUrl, HostPortAndDatabase) {
  const redis_url a = parse_redis_url("redis://127.0.0.1:6380/2");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 2);
  const redis_url b = parse_redis_url("redis://broker.internal");
  EXPECT_EQ(b.host, "broker.internal");
  EXPECT_EQ(b.port, 6379);
  EXPECT_EQ(b.db, 0);
  const redis_url c = parse_redis_url("redis://[::1]:7000/");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 7000);
  EXPECT_EQ(c.db, 0);
}

TEST(RedisUrl, RejectsWhatWeDoNotSpeak) {
  for (const char* bad :
       {"", "rediss://a", "http://a:1", "redis://", "redis://:pw@a:1", "redis://u:pw@a", "redis://a:99999",
        "redis://a/16", "redis://a/x", "redis://a/1/2", "redis://a/-1", "redis://a?db=1", "redis://a_b"}) {
    EXPECT_THROW(parse_redis_url(bad), std::invalid_argument) << bad;
  }
  try {
    parse_redis_url("redis://:secret@a");
    FAIL() << "accepted a password";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--broker-password-file"), std::string::npos) << e.what();
  }
}

TEST(BrokerUrl, OneRedisOrAClustersSeedNodes) {
  const broker_url one = parse_broker_url("redis://127.0.0.1:6380/2");
  EXPECT_FALSE(one.cluster);
  ASSERT_EQ(one.nodes.size(), 1u);
  EXPECT_EQ(one.nodes[0].db, 2);
  const broker_url c = parse_broker_url("redis+cluster://10.0.0.1:7000,[::1]:7001,redis.internal");
  EXPECT_TRUE(c.cluster);
  ASSERT_EQ(c.nodes.size(), 3u);
  EXPECT_EQ(c.nodes[0].host, "10.0.0.1");
  EXPECT_EQ(c.nodes[0].port, 7000);
  EXPECT_EQ(c.nodes[1].host, "::1");
  EXPECT_EQ(c.nodes[1].port, 7001);
  EXPECT_EQ(c.nodes[2].host, "redis.internal");
  EXPECT_EQ(c.nodes[2].port, 6379);
  for (const char* bad :
       {"redis+cluster://", "redis+cluster://a:1,", "redis+cluster://a:1/0", "redis+cluster://a:1,b/2",
        "redis+cluster://u:pw@a:1", "redis+cluster://a:99999", "rediss+cluster://a:1", "a:1"}) {
    EXPECT_THROW(parse_broker_url(bad), std::invalid_argument) << bad;
  }
  try {
    parse_broker_url("redis+cluster://a:1/3", "--broker");
    FAIL() << "accepted a database";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("only database 0"), std::string::npos) << e.what();
  }
}

TEST(IpEndpoint, AddressAndPort) {
  auto ep = parse_ip_endpoint("127.0.0.1:8080");
  EXPECT_EQ(ep.address().to_string(), "127.0.0.1");
  EXPECT_EQ(ep.port(), 8080);
  ep = parse_ip_endpoint("[::1]:0");
  EXPECT_TRUE(ep.address().is_v6());
  EXPECT_TRUE(ep.address().is_loopback());
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "host:80", "::1:80", "[::1]80",
                          "1.2.3.4:-1", "u@1.2.3.4:1"}) {
    EXPECT_THROW(parse_ip_endpoint(bad), std::invalid_argument) << bad;
  }
  try {
    parse_ip_endpoint("host:80", "listen address");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "listen address 'host' is not an IP address");
  }
}

TEST(Endpoint, PrintedAsAsioDoes) {
  namespace ip = boost::asio::ip;
  EXPECT_EQ(endpoint_string({ip::make_address("127.0.0.1"), 80}), "127.0.0.1:80");
  EXPECT_EQ(endpoint_string({ip::make_address("::1"), 80}), "[::1]:80");
}

}  // namespace
}  // namespace hourglass::support
