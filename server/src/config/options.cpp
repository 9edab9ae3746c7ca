#include "hourglass/server/options.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <stdexcept>
#include <thread>

#include "hourglass/server/handler.hpp"
#include "hourglass/support/url.hpp"
#include "schedules/schedules.hpp"

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

listen_endpoint parse_listen(const std::string& text) {
  const auto endpoint = support::parse_ip_endpoint(text, "listen address");
  listen_endpoint ep;
  ep.address = endpoint.address().to_string();
  ep.port = endpoint.port();
  ep.loopback = endpoint.address().is_loopback();
  return ep;
}

upstream_url parse_upstream_url(const std::string& url) {
  const support::http_url parsed = support::parse_http_url(url, "upstream URL");
  upstream_url u;
  u.host = parsed.host;
  u.port = std::to_string(parsed.port);
  std::string_view prefix = parsed.path;
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  u.prefix = std::string(prefix);
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
  if (o.max_result == 0) fail("--max-result must be at least 1");
  if (o.async_max_result_bytes < o.max_result) fail("--async-max-result-bytes must hold one --max-result at least");
  if (o.default_budget <= duration::zero()) fail("--default-budget must be positive");
  if (o.max_budget <= duration::zero()) fail("--max-budget must be positive");
  if (o.default_budget > o.max_budget) fail("--default-budget must not exceed --max-budget");
  if (o.min_budget < duration::zero()) fail("--min-budget must not be negative");
  if (o.breaker_failures < 1) fail("--breaker-failures must be at least 1");
  if (o.breaker_open <= duration::zero()) fail("--breaker-open must be positive");
  if (o.min_budget >= o.max_budget) fail("--min-budget must be below --max-budget");
  if (o.call_reserve < duration::zero()) fail("--call-reserve must not be negative");
  if (o.drain_timeout < duration::zero()) fail("--drain-timeout must not be negative");
  if (o.metrics_cache < duration::zero()) fail("--metrics-cache must not be negative");
  for (const auto* d :
       {&o.header_timeout, &o.body_timeout, &o.write_timeout, &o.idle_timeout, &o.async_ttl, &o.max_delay}) {
    if (*d <= duration::zero()) fail("timeouts, --async-ttl and --max-delay must be positive");
  }
  for (const auto& [name, url] : o.upstreams) {
    if (!valid_handler_name(name)) fail("upstream name '" + name + "' must be 1-64 of [A-Za-z0-9._-]");
    (void)parse_upstream_url(url);
  }
  for (const auto& [name, policy] : o.handler_retries) {
    if (!valid_handler_name(name)) fail("--retry: handler name '" + name + "' must be 1-64 of [A-Za-z0-9._-]");
  }
  std::set<std::string, std::less<>> schedule_names;
  for (const schedule_options& s : o.schedules) {
    if (!valid_handler_name(s.name)) fail("schedule name '" + s.name + "' must be 1-64 of [A-Za-z0-9._-]");
    if (!schedule_names.insert(s.name).second) fail("two schedules are named '" + s.name + "'");
    if (!valid_handler_name(s.handler)) fail("schedule '" + s.name + "': handler '" + s.handler + "' is not a name");
    (void)detail::read_schedule(s);  // its cron expression, zone and freshness
  }
  if (o.produce_only && o.broker.empty())
    fail("--produce-only needs --broker: in memory, jobs run where they are taken");
  if (o.queue_shards != 1 && o.broker.empty()) fail("--queue-shards needs --broker: only a fleet's queue has shards");
  if (o.refuse_while_paused && o.broker.empty())
    fail("--refuse-while-paused needs --broker: only a fleet's queue pauses");
  if (!o.broker.empty()) {
    (void)support::parse_broker_url(o.broker, "--broker");
    if (o.queue.empty() || o.queue.find_first_of("{}: \t\r\n") != std::string::npos) {
      fail("--queue '" + o.queue + "' must be non-empty, without {, }, : or spaces");
    }
    if (o.lease < std::chrono::milliseconds(30)) fail("--lease must be at least 30ms");
    // A job's hash holds its payload and its result: read whole, it must fit
    // the broker client's 64 MiB reply limit, with room for its other fields.
    if (o.max_body + o.max_result > (std::size_t{48} << 20)) {
      fail("--max-body and --max-result together must be at most 48 MiB in fleet mode (a job's record is read whole)");
    }
    if (o.broker_replica_timeout < std::chrono::milliseconds(1)) fail("--broker-replica-timeout must be at least 1ms");
    if (o.max_deliveries == 0) fail("--max-deliveries must be at least 1");
    if (o.result_ttl < std::chrono::milliseconds(1) || o.idempotency_ttl < std::chrono::milliseconds(1)) {
      fail("--result-ttl and --idempotency-ttl must be at least 1ms");
    }
  }
  static constexpr std::array<std::string_view, 7> levels = {"trace", "debug",    "info", "warn",
                                                             "error", "critical", "off"};
  bool level_ok = false;
  for (auto l : levels) level_ok = level_ok || l == o.log_level;
  if (!level_ok) fail("--log-level must be one of trace debug info warn error critical off");
}

}  // namespace hourglass::server
