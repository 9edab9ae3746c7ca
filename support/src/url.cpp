#include "hourglass/support/url.hpp"

#include <boost/url/authority_view.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <charconv>
#include <sstream>
#include <stdexcept>

namespace hourglass::support {

namespace {

[[noreturn]] void fail(std::string_view what, const std::string& message) {
  throw std::invalid_argument(std::string(what) + " " + message);
}

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

// Boost.URL accepts any run of digits as a port; we want 0-65535.
std::uint16_t port_number(std::string_view digits, std::string_view what, std::string_view whole) {
  unsigned value = 0;
  const char* end = digits.data() + digits.size();
  const auto [p, ec] = std::from_chars(digits.data(), end, value);
  if (digits.empty() || ec != std::errc() || p != end || value > 65535)
    fail(what, "has an invalid port: " + quoted(whole));
  return static_cast<std::uint16_t>(value);
}

bool plain_host_name(std::string_view host) noexcept {
  for (const char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
    if (!ok) return false;
  }
  return !host.empty();
}

}  // namespace

http_url parse_http_url(std::string_view text, std::string_view what) {
  namespace urls = boost::urls;
  if (text.substr(0, 7) != "http://") fail(what, "must start with http:// (no TLS), got " + quoted(text));
  const auto parsed = urls::parse_uri(text);
  if (!parsed) fail(what, "is not a valid URL: " + quoted(text) + " (" + parsed.error().message() + ")");
  const urls::url_view& u = *parsed;
  if (u.has_userinfo()) fail(what, "must not carry credentials: " + quoted(text));
  if (u.has_query() || u.has_fragment()) fail(what, "path must be a plain prefix (no ? or #), got " + quoted(text));
  http_url out;
  out.host = std::string(u.encoded_host_address());
  if (out.host.empty()) fail(what, "has no host: " + quoted(text));
  switch (u.host_type()) {
    case urls::host_type::ipv4:
    case urls::host_type::ipv6: break;
    case urls::host_type::name:
      if (plain_host_name(out.host)) break;
      [[fallthrough]];
    default: fail(what, "has a bad host: " + quoted(text));
  }
  if (u.has_port()) out.port = port_number(u.port(), what, text);
  out.path = std::string(u.encoded_path());
  out.host_header = std::string(u.encoded_host());  // IPv6 keeps its brackets
  if (out.port != 80) out.host_header += ":" + std::to_string(out.port);
  return out;
}

redis_url parse_redis_url(std::string_view text, std::string_view what) {
  namespace urls = boost::urls;
  if (text.substr(0, 8) != "redis://") fail(what, "must be redis://HOST:PORT[/DB], got " + quoted(text));
  const auto parsed = urls::parse_uri(text);
  if (!parsed) fail(what, "is not a valid URL: " + quoted(text) + " (" + parsed.error().message() + ")");
  const urls::url_view& u = *parsed;
  if (u.has_userinfo()) fail(what, "must not carry credentials (use --broker-password-file): " + quoted(text));
  if (u.has_query() || u.has_fragment()) fail(what, "must not have a query or fragment: " + quoted(text));
  redis_url out;
  out.host = std::string(u.encoded_host_address());
  const bool ip = u.host_type() == urls::host_type::ipv4 || u.host_type() == urls::host_type::ipv6;
  if (!ip && !(u.host_type() == urls::host_type::name && plain_host_name(out.host))) {
    fail(what, "has no or a bad host: " + quoted(text));
  }
  if (u.has_port()) out.port = port_number(u.port(), what, text);
  std::string_view path = u.encoded_path();
  if (!path.empty() && path != "/") {
    path.remove_prefix(1);
    unsigned db = 0;
    const auto [p, ec] = std::from_chars(path.data(), path.data() + path.size(), db);
    if (ec != std::errc() || p != path.data() + path.size() || db > 15) {
      fail(what, "has a bad database number (0-15): " + quoted(text));
    }
    out.db = static_cast<int>(db);
  }
  return out;
}

broker_url parse_broker_url(std::string_view text, std::string_view what) {
  constexpr std::string_view cluster_scheme = "redis+cluster://";
  broker_url out;
  if (text.substr(0, cluster_scheme.size()) != cluster_scheme) {
    if (text.substr(0, 8) != "redis://") {
      fail(what, "must be redis://HOST:PORT[/DB] or redis+cluster://HOST:PORT[,HOST:PORT...], got " + quoted(text));
    }
    out.nodes.push_back(parse_redis_url(text, what));
    return out;
  }
  out.cluster = true;
  std::string_view rest = text.substr(cluster_scheme.size());
  while (true) {
    const auto comma = rest.find(',');
    const std::string node = "redis://" + std::string(rest.substr(0, comma));
    std::string_view path = node;
    path.remove_prefix(8);
    if (path.find('/') != std::string_view::npos) {
      fail(what, "names a database or path; a Redis Cluster has only database 0: " + quoted(text));
    }
    out.nodes.push_back(parse_redis_url(node, what));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

boost::asio::ip::tcp::endpoint parse_ip_endpoint(std::string_view text, std::string_view what) {
  namespace urls = boost::urls;
  const auto parsed = urls::parse_authority(text);
  if (!parsed || parsed->has_userinfo() || !parsed->has_port()) {
    fail(what, "must be ADDR:PORT or [IPv6]:PORT, got " + quoted(text));
  }
  const urls::authority_view& a = *parsed;
  const std::string host(a.encoded_host_address());
  const bool ip = a.host_type() == urls::host_type::ipv4 || a.host_type() == urls::host_type::ipv6;
  boost::system::error_code ec;
  boost::asio::ip::address address;
  if (ip) address = boost::asio::ip::make_address(host, ec);
  if (!ip || ec) fail(what, quoted(host) + " is not an IP address");
  return {address, port_number(a.port(), what, text)};
}

std::string endpoint_string(const boost::asio::ip::tcp::endpoint& endpoint) {
  std::ostringstream out;
  out << endpoint;
  return out.str();
}

}  // namespace hourglass::support
