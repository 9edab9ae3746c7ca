// hourglass's one URL parser (Boost.URL) and endpoint printing (Asio).
// Internal: shared by the daemon, the bench and tests.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hourglass::support {

// A plain http:// URL: what hourglassd may call upstream and what the bench
// loads. No TLS, no credentials, no query or fragment.
struct http_url {
  std::string host;  // a name, an IPv4 address or an IPv6 address without brackets
  std::uint16_t port = 80;
  std::string path;         // as written, "" when the URL has none
  std::string host_header;  // the Host header: "name", "[::1]:9" (no ":80")
};

// Throws std::invalid_argument with a message that names `what` ("upstream
// URL", "URL") and quotes `text`: not http://, credentials, no host, a host
// that is not a plain name or IP literal, a bad port (default 80), a query or
// fragment, or anything Boost.URL does not parse as a URI.
http_url parse_http_url(std::string_view text, std::string_view what = "URL");

// redis://HOST[:PORT][/DB]: the fleet's broker (--broker, docs/reference/cli.md).
// No credentials in the URL: the password comes from --broker-password-file.
struct redis_url {
  std::string host;  // a name, an IPv4 address or an IPv6 address without brackets
  std::uint16_t port = 6379;
  int db = 0;  // 0-15
};

// Throws std::invalid_argument naming `what` and quoting `text`: not redis://,
// credentials, no or bad host, a bad port, a DB that is not 0-15, a query or
// fragment.
redis_url parse_redis_url(std::string_view text, std::string_view what = "broker URL");

// The fleet's broker: one Redis ("redis://HOST[:PORT][/DB]"), or a Redis
// Cluster named by some of its nodes ("redis+cluster://HOST[:PORT][,HOST[:PORT]...]";
// the client learns the rest from them; a cluster has only database 0).
struct broker_url {
  bool cluster = false;
  std::vector<redis_url> nodes;  // one unless cluster
};
// Throws std::invalid_argument as parse_redis_url does, for each node.
broker_url parse_broker_url(std::string_view text, std::string_view what = "broker URL");

// "ADDR:PORT" or "[IPv6]:PORT" where ADDR is an IP address (not a name) and
// PORT is 0-65535. Throws std::invalid_argument naming `what` ("listen
// address") and quoting `text`.
boost::asio::ip::tcp::endpoint parse_ip_endpoint(std::string_view text, std::string_view what = "address");

// "127.0.0.1:80", "[::1]:80": as Asio prints an endpoint.
std::string endpoint_string(const boost::asio::ip::tcp::endpoint& endpoint);

}  // namespace hourglass::support
