#include "http/request_rules.hpp"

#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/url/authority_view.hpp>
#include <boost/url/parse.hpp>

#include <algorithm>
#include <charconv>
#include <optional>
#include <vector>

#include "hourglass/budget_codec.hpp"

namespace hourglass::server::detail {

namespace http = boost::beast::http;

namespace {

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Compares in time that depends on the lengths only, never on where the bytes differ.
bool constant_time_equal(std::string_view given, std::string_view expected) noexcept {
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0u;
    diff |= g ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

// A header that must appear at most once: nullopt when absent; `dup` when repeated.
std::optional<std::string_view> single_header(const http::fields& f, std::string_view name, bool& dup) {
  const auto n = f.count(name);
  if (n == 0) return std::nullopt;
  if (n > 1) dup = true;
  return std::string_view(f[name]);
}

}  // namespace

route route_request(http::verb m, std::string_view target) noexcept {
  const std::string_view path = target.substr(0, target.find('?'));
  const bool get_like = m == http::verb::get || m == http::verb::head;
  const auto probe = [&](route_kind kind, bool auth) {
    return get_like ? route{kind, {}, {}, auth} : route{route_kind::method_not_allowed, {}, "GET, HEAD", auth};
  };
  if (path == "/healthz") return probe(route_kind::healthz, false);
  if (path == "/ui") return probe(route_kind::ui_redirect, false);
  if (path.substr(0, 4) == "/ui/") {
    route r = probe(route_kind::ui_asset, false);
    if (get_like) r.name = path.substr(4);
    return r;
  }
  if (path == "/readyz") return probe(route_kind::readyz, true);
  if (path == "/metrics") return probe(route_kind::metrics, true);
  if (path == schedules_path) return probe(route_kind::schedules, true);
  if (path == job_list_path) return probe(route_kind::list_jobs, true);
  if (path == queues_path) return probe(route_kind::list_queues, true);
  if (path.size() > queues_path.size() + 1 && path.substr(0, queues_path.size()) == queues_path &&
      path[queues_path.size()] == '/') {
    const std::string_view rest = path.substr(queues_path.size() + 1);
    const auto slash = rest.find('/');
    const std::string_view name = rest.substr(0, slash);
    if (slash == std::string_view::npos) {
      route r = probe(route_kind::get_queue, true);
      r.name = name;
      return r;
    }
    const std::string_view action = rest.substr(slash + 1);
    if (!name.empty() && action == "dead/replay") {  // not a job id: those are 32 hex digits
      if (m != http::verb::post) return {route_kind::method_not_allowed, name, "POST"};
      return {route_kind::replay_dead_bulk, name, {}, false, true};
    }
    if (!name.empty() && (action == "dead" || action.substr(0, 5) == "dead/")) {
      const std::string_view id = action.size() > 5 ? action.substr(5) : std::string_view();
      if (action.size() == 5 || id.find('/') != std::string_view::npos) return {};  // "dead/" alone, or deeper
      if (m != http::verb::delete_) return {route_kind::method_not_allowed, name, "DELETE"};
      route r{id.empty() ? route_kind::purge_dead : route_kind::delete_dead, name, {}, false, true};
      r.item = id;
      return r;
    }
    if (name.empty() || (action != "pause" && action != "resume")) return {};
    if (m != http::verb::post) return {route_kind::method_not_allowed, name, "POST"};
    return {action == "pause" ? route_kind::pause_queue : route_kind::resume_queue, name, {}, false, true};
  }
  if (path == bulk_jobs_path) {
    return m == http::verb::post ? route{route_kind::submit_bulk} : route{route_kind::method_not_allowed, {}, "POST"};
  }
  if (path.substr(0, jobs_path.size()) == jobs_path) {
    const std::string_view rest = path.substr(jobs_path.size());
    // By whole segments: {id}/replay, {id}/signals/{name}. A signal's name
    // is any name (it may be "replay"): matched by position, never by suffix.
    const auto slash = rest.find('/');
    if (slash != std::string_view::npos) {
      const std::string_view id = rest.substr(0, slash);
      const std::string_view action = rest.substr(slash + 1);
      if (id.empty()) return {};
      if (action == "replay") {
        if (m != http::verb::post) return {route_kind::method_not_allowed, id, "POST"};
        return {route_kind::replay_job, id, {}, false, true};
      }
      constexpr std::string_view signals = "signals/";
      if (action.substr(0, signals.size()) != signals) return {};
      const std::string_view name = action.substr(signals.size());
      if (name.empty() || name.find('/') != std::string_view::npos) return {};
      if (m != http::verb::post) return {route_kind::method_not_allowed, id, "POST"};
      route r{route_kind::signal_job, id};
      r.item = name;
      return r;
    }
    if (rest.empty() || rest.find('/') != std::string_view::npos) return {};
    switch (m) {
      case http::verb::post: return {route_kind::submit_job, rest};
      case http::verb::get: return {route_kind::get_job, rest};
      case http::verb::delete_: return {route_kind::cancel_job, rest};
      default: return {route_kind::method_not_allowed, rest, "GET, POST, DELETE"};
    }
  }
  return {};
}

read_error sort_read_error(const boost::system::error_code& ec) noexcept {
  if (!ec) return read_error::none;
  if (ec == http::error::header_limit) return read_error::header_limit;
  if (ec == http::error::body_limit) return read_error::body_limit;
  if (ec == http::error::partial_message) return read_error::partial_message;
  if (ec == http::error::end_of_stream) return read_error::end_of_stream;
  if (ec == boost::beast::error::timeout) return read_error::timeout;
  if (ec.category() == http::make_error_code(http::error::bad_target).category()) return read_error::malformed;
  return read_error::transport;
}

boost::system::error_code read_as_seen(const boost::system::error_code& ec, bool timed_out) noexcept {
  return timed_out ? boost::beast::error::timeout : ec;
}

framing judge_framing(const http::fields& req) {
  const std::size_t lengths = req.count(http::field::content_length);
  if (lengths > 1) return framing::ambiguous;
  if (lengths == 1 && req[http::field::content_length].find(',') != std::string_view::npos) return framing::ambiguous;
  const auto [first, last] = req.equal_range(http::field::transfer_encoding);
  if (first == last) return framing::ok;
  std::vector<std::string_view> codings;
  for (auto it = first; it != last; ++it) {
    for (const auto& coding : http::token_list(it->value())) codings.emplace_back(coding.data(), coding.size());
  }
  if (codings.empty() || !iequals(codings.back(), "chunked")) return framing::ambiguous;
  return codings.size() == 1 ? framing::ok : framing::unsupported;
}

bool same_origin_or_none(std::string_view origin, std::string_view host) noexcept {
  if (origin.empty()) return true;
  // http://, or https:// through a TLS-terminating proxy that keeps Host.
  const auto scheme_end = origin.find("://");
  if (scheme_end == std::string_view::npos) return false;
  const std::string_view scheme = origin.substr(0, scheme_end);
  const bool https = iequals(scheme, "https");
  if (!https && !iequals(scheme, "http")) return false;
  const std::string_view authority = origin.substr(scheme_end + 3);
  host = trim(host);
  // The scheme's default port may be written or left out on either side.
  const std::string_view default_port = https ? ":443" : ":80";
  const auto without_default_port = [&](std::string_view a) {
    return a.size() > default_port.size() && a.substr(a.size() - default_port.size()) == default_port
               ? a.substr(0, a.size() - default_port.size())
               : a;
  };
  return !authority.empty() && !host.empty() && iequals(without_default_port(authority), without_default_port(host));
}

bool host_allowed(std::string_view host, const std::vector<std::string>& allowed_hosts) noexcept {
  host = trim(host);
  if (host.empty()) return true;
  // Boost.URL's RFC 3986 authority: host and port, told apart from userinfo.
  const auto authority = boost::urls::parse_authority(host);
  if (!authority || authority->has_userinfo()) return false;
  if (authority->has_port()) {  // digits that fit a port (Boost.URL's port_number() wraps larger ones)
    const std::string_view port = authority->port();
    std::uint16_t n = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size()) return false;
  }
  switch (authority->host_type()) {
    case boost::urls::host_type::ipv4:
    case boost::urls::host_type::ipv6: return true;  // an address is not a name to rebind
    case boost::urls::host_type::name: break;
    default: return false;  // IPvFuture, or none
  }
  std::string_view name = authority->encoded_host();
  if (name.empty()) return false;
  if (name.back() == '.') name.remove_suffix(1);     // "localhost." is the same name
  const auto under = [&](std::string_view suffix) {  // suffix ".x": a subdomain of x
    return name.size() > suffix.size() && iequals(name.substr(name.size() - suffix.size()), suffix);
  };
  if (iequals(name, "localhost") || under(".localhost")) return true;
  for (const std::string& a : allowed_hosts) {
    if (a == "*" || iequals(name, a)) return true;
    if (a.size() > 1 && a.front() == '.' && (under(a) || iequals(name, std::string_view(a).substr(1)))) return true;
  }
  return false;
}

bool bearer_authorized(std::string_view auth, std::string_view token) noexcept {
  if (token.empty()) return true;
  constexpr std::string_view scheme = "Bearer ";
  if (auth.size() < scheme.size() || !iequals(auth.substr(0, scheme.size()), scheme)) return false;
  return constant_time_equal(trim(auth.substr(scheme.size())), token);
}

bool request_authorized(std::string_view authorization, bool read, std::string_view token,
                        std::string_view admin_token) noexcept {
  if (bearer_authorized(authorization, token)) return true;
  return read && !admin_token.empty() && bearer_authorized(authorization, admin_token);
}

bool prefers_async(std::string_view prefer) noexcept {
  while (!prefer.empty()) {
    const auto comma = prefer.find(',');
    std::string_view item = trim(prefer.substr(0, comma));
    item = trim(item.substr(0, item.find_first_of(";=")));
    if (iequals(item, "respond-async")) return true;
    if (comma == std::string_view::npos) break;
    prefer.remove_prefix(comma + 1);
  }
  return false;
}

budget_reading read_budget(const http::fields& req, const budget_limits& limits, bool always_async) {
  budget_reading r;
  bool dup = false;
  budget_headers h;
  h.request_timeout = single_header(req, request_timeout_header, dup);
  h.grpc_timeout = single_header(req, grpc_timeout_header, dup);
  h.envoy_timeout_ms = single_header(req, envoy_timeout_ms_header, dup);
  h.connect_timeout_ms = single_header(req, connect_timeout_ms_header, dup);
  const header_budget stated = tightest_budget(h);
  r.async = always_async || prefers_async(req[http::field::prefer]);
  std::optional<duration> freshness;
  bool bad_freshness = false;
  if (r.async) {
    if (const auto f = single_header(req, job_freshness_header, dup)) {
      freshness = parse_grpc_timeout(*f);
      bad_freshness = !freshness.has_value();
    }
  }
  std::optional<duration> idle;
  bool bad_idle = false;
  if (const auto i = single_header(req, job_idle_timeout_header, dup)) {
    idle = parse_grpc_timeout(*i);
    bad_idle = !idle.has_value() || *idle <= duration::zero();  // zero would stop every job at once
  }
  if (dup) {
    r.ok = false;
    r.message = "a budget header appears more than once";
  } else if (stated.state == header_budget::kind::invalid || bad_freshness || bad_idle) {
    r.ok = false;
    const std::string_view bad = bad_freshness ? job_freshness_header
                                 : bad_idle    ? job_idle_timeout_header
                                               : std::string_view(stated.bad_header);
    r.message = "malformed " + std::string(bad) + " header";
  }
  if (!r.ok) return r;
  r.budget = effective_budget(stated, limits.default_budget, limits.max_budget);
  r.freshness = std::min(freshness.value_or(limits.default_budget), limits.max_budget);
  r.idle_limit = idle.value_or(duration::max());
  return r;
}

job_retry_reading read_job_retry(const http::fields& req, const job_retry_policy& handler_policy,
                                 duration max_backoff) {
  job_retry_reading r;
  r.policy = handler_policy;
  const auto refuse = [&r](std::string error, std::string_view header, std::string_view why) {
    r.ok = false;
    r.error = std::move(error);
    r.message = std::string(header) + " " + std::string(why);
    return r;
  };
  bool dup = false;
  const auto attempts = single_header(req, job_attempts_header, dup);
  const auto backoff = single_header(req, job_backoff_header, dup);
  const auto deadline = single_header(req, job_deadline_header, dup);
  if (dup) return refuse("invalid_retry_policy", "a retry header", "appears more than once");
  if (deadline) {
    const std::optional<duration> d = parse_grpc_timeout(trim(*deadline));
    if (!d) return refuse("invalid_timeout", job_deadline_header, "is not a duration (grpc-timeout syntax: 30S, 500m)");
    r.deadline = *d;
  }
  if (attempts) {
    const std::string_view text = trim(*attempts);
    int n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 100) {
      return refuse("invalid_retry_policy", job_attempts_header, "must be an integer from 1 to 100");
    }
    r.policy.max_attempts = n;
  }
  if (backoff) {
    const auto semicolon = backoff->find(';');
    const std::string_view text = backoff->substr(0, semicolon);
    if (semicolon != std::string_view::npos) {
      const std::optional<bool> jitter = read_jitter_parameter(backoff->substr(semicolon + 1));
      if (!jitter)
        return refuse("invalid_retry_policy", job_backoff_header, "parameter must be jitter=full or jitter=none");
      r.policy.jitter = *jitter;
    }
    const auto comma = text.find(',');
    const std::optional<duration> base = parse_grpc_timeout(trim(text.substr(0, comma)));
    const std::optional<duration> cap = comma == std::string_view::npos
                                            ? std::optional<duration>(
                                                  std::max(r.policy.cap, base.value_or(duration::zero())))
                                            : parse_grpc_timeout(trim(text.substr(comma + 1)));
    if (!base || !cap) {
      return refuse("invalid_retry_policy", job_backoff_header, "must be BASE[, CAP][; jitter=none] (30S, 500m)");
    }
    if (*cap < *base) return refuse("invalid_retry_policy", job_backoff_header, "has its cap below its base");
    if (*cap > max_backoff) return refuse("invalid_retry_policy", job_backoff_header, "is past --max-delay");
    r.policy.base = *base;
    r.policy.cap = *cap;
  }
  return r;
}

job_delay_reading read_job_delay(const http::fields& req, duration max_delay, support::wall_time wall_now) {
  job_delay_reading r;
  const auto refuse = [&r](std::string_view header, std::string_view why) {
    r.ok = false;
    r.message = std::string(header) + " " + std::string(why);
    return r;
  };
  bool dup = false;
  const auto delay = single_header(req, job_delay_header, dup);
  const auto not_before = single_header(req, job_not_before_header, dup);
  if (dup) return refuse("a delay header", "appears more than once");
  if (delay && not_before) return refuse(job_delay_header, "and Job-Not-Before both say when: send one");
  const std::string too_far = "is past --max-delay from now";
  if (delay) {
    const std::optional<duration> d = parse_grpc_timeout(trim(*delay));
    if (!d) return refuse(job_delay_header, "is not a duration (grpc-timeout syntax: 30S, 500m)");
    if (*d > max_delay) return refuse(job_delay_header, too_far);
    r.delay = *d;
  }
  if (not_before) {
    const std::optional<support::wall_time> t = support::parse_rfc3339(trim(*not_before));
    if (!t) return refuse(job_not_before_header, "is not an RFC 3339 time (2026-12-05T10:00:00Z)");
    // In microseconds: centuries ahead overflow nanoseconds.
    if (*t > wall_now && *t - wall_now > std::chrono::duration_cast<std::chrono::microseconds>(max_delay))
      return refuse(job_not_before_header, too_far);
    r.not_before = *t;
  }
  return r;
}

}  // namespace hourglass::server::detail
