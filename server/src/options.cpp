#include "hourglass/server/options.hpp"

#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <stdexcept>
#include <thread>

#include "hourglass/server/handler.hpp"

namespace hourglass::server {

bool valid_handler_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {

std::uint16_t parse_port(std::string_view text, const std::string& whole) {
  unsigned value = 0;
  const auto* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || p != end || value > 65535) {
    throw std::invalid_argument("invalid port in '" + whole + "'");
  }
  return static_cast<std::uint16_t>(value);
}

}  // namespace

listen_endpoint parse_listen(const std::string& text) {
  listen_endpoint ep;
  std::string host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      throw std::invalid_argument("listen address must be ADDR:PORT or [IPv6]:PORT, got '" + text + "'");
    }
    host = text.substr(1, close - 1);
    port = std::string_view(text).substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) {
      throw std::invalid_argument("listen address must be ADDR:PORT or [IPv6]:PORT, got '" + text + "'");
    }
    host = text.substr(0, colon);
    port = std::string_view(text).substr(colon + 1);
  }
  boost::system::error_code ec;
  const auto addr = boost::asio::ip::make_address(host, ec);
  if (ec) throw std::invalid_argument("listen address '" + host + "' is not an IP address");
  ep.address = addr.to_string();
  ep.port = parse_port(port, text);
  ep.loopback = addr.is_loopback();
  return ep;
}

upstream_url parse_upstream_url(const std::string& url) {
  constexpr std::string_view scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0) {
    throw std::invalid_argument("upstream URL must start with http:// (no TLS), got '" + url + "'");
  }
  std::string_view rest = std::string_view(url).substr(scheme.size());
  upstream_url u;
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    for (const char c : path) {
      if (c == '?' || c == '#' || c == ' ' || static_cast<unsigned char>(c) < 0x20) {
        throw std::invalid_argument("upstream URL path must be a plain prefix, got '" + url + "'");
      }
    }
    u.prefix = std::string(path);
  }
  if (authority.find('@') != std::string_view::npos) {
    throw std::invalid_argument("upstream URL must not carry credentials: '" + url + "'");
  }
  std::string_view port = "80";
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) throw std::invalid_argument("bad IPv6 host in '" + url + "'");
    u.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') throw std::invalid_argument("bad host in '" + url + "'");
      port = authority.substr(close + 2);
    }
  } else {
    const auto colon = authority.find(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) throw std::invalid_argument("upstream URL has no host: '" + url + "'");
  for (const char c : u.host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-' || c == ':';
    if (!ok) throw std::invalid_argument("bad host in upstream URL '" + url + "'");
  }
  u.port = std::to_string(parse_port(port, url));
  return u;
}

std::size_t default_workers() noexcept { return std::max(1u, std::thread::hardware_concurrency()); }

void validate(const server_options& o) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
  const listen_endpoint ep = parse_listen(o.listen);
  if (!ep.loopback && o.auth_token_file.empty() && !o.allow_unauthenticated) {
    fail("refusing to listen on non-loopback address " + o.listen +
         " without --auth-token-file (pass --allow-unauthenticated to do it anyway)");
  }
  if (o.workers == 0) fail("--workers must be at least 1 (the default is one per CPU)");
  if (o.io_threads == 0) fail("--io-threads must be at least 1");
  if (o.queue_capacity == 0) fail("--queue-capacity must be at least 1");
  if (o.max_connections == 0) fail("--max-connections must be at least 1");
  if (o.async_max_jobs == 0) fail("--async-max-jobs must be at least 1");
  if (o.default_budget <= duration::zero()) fail("--default-budget must be positive");
  if (o.max_budget <= duration::zero()) fail("--max-budget must be positive");
  if (o.default_budget > o.max_budget) fail("--default-budget must not exceed --max-budget");
  if (o.min_budget < duration::zero()) fail("--min-budget must not be negative");
  if (o.min_budget >= o.max_budget) fail("--min-budget must be below --max-budget");
  if (o.call_reserve < duration::zero()) fail("--call-reserve must not be negative");
  if (o.drain_timeout < duration::zero()) fail("--drain-timeout must not be negative");
  for (const auto* d : {&o.header_timeout, &o.body_timeout, &o.idle_timeout, &o.async_ttl}) {
    if (*d <= duration::zero()) fail("timeouts and --async-ttl must be positive");
  }
  for (const auto& [name, url] : o.upstreams) {
    if (!valid_handler_name(name)) fail("upstream name '" + name + "' must be 1-64 of [A-Za-z0-9._-]");
    (void)parse_upstream_url(url);
  }
  static constexpr std::array<std::string_view, 7> levels = {"trace", "debug", "info", "warn",
                                                             "error", "critical", "off"};
  bool level_ok = false;
  for (auto l : levels) level_ok = level_ok || l == o.log_level;
  if (!level_ok) fail("--log-level must be one of trace debug info warn error critical off");
}

}  // namespace hourglass::server
