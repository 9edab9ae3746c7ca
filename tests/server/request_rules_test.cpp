// The daemon's per-request decisions, without a socket: routes, auth, the
// budget read from headers, and the sync call's state machine.
#include "http/request_rules.hpp"

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

namespace hourglass::server::detail {
namespace {

using namespace std::chrono_literals;
namespace http = boost::beast::http;

TEST(RouteRequest, EveryPathAndMethod) {
  struct row {
    http::verb m;
    const char* target;
    route_kind kind;
    const char* name;
    const char* allow;
    bool auth;
  };
  const row rows[] = {
      {http::verb::get, "/healthz", route_kind::healthz, "", "", false},
      {http::verb::head, "/healthz?x=1", route_kind::healthz, "", "", false},
      {http::verb::post, "/v1/queues/default/dead/replay", route_kind::replay_dead_bulk, "default", "", false},
      {http::verb::get, "/v1/queues/default/dead/replay", route_kind::method_not_allowed, "default", "POST", true},
      {http::verb::get, "/ui", route_kind::ui_redirect, "", "", false},
      {http::verb::get, "/ui/", route_kind::ui_asset, "", "", false},
      {http::verb::head, "/ui/app.js?v=2", route_kind::ui_asset, "app.js", "", false},
      {http::verb::post, "/ui/app.js", route_kind::method_not_allowed, "", "GET, HEAD", false},
      {http::verb::post, "/healthz", route_kind::method_not_allowed, "", "GET, HEAD", false},
      {http::verb::get, "/readyz", route_kind::readyz, "", "", true},
      {http::verb::delete_, "/readyz", route_kind::method_not_allowed, "", "GET, HEAD", true},
      {http::verb::get, "/metrics", route_kind::metrics, "", "", true},
      {http::verb::post, "/v1/jobs/echo", route_kind::submit_job, "echo", "", true},
      {http::verb::post, "/v1/jobs/echo?debug", route_kind::submit_job, "echo", "", true},
      {http::verb::get, "/v1/jobs/j-12", route_kind::get_job, "j-12", "", true},
      {http::verb::delete_, "/v1/jobs/j-12", route_kind::cancel_job, "j-12", "", true},
      {http::verb::put, "/v1/jobs/echo", route_kind::method_not_allowed, "echo", "GET, POST, DELETE", true},
      {http::verb::post, "/v1/jobs:bulk", route_kind::submit_bulk, "", "", true},
      {http::verb::get, "/v1/jobs:bulk", route_kind::method_not_allowed, "", "POST", true},
      {http::verb::post, "/v1/jobs/", route_kind::not_found, "", "", true},
      {http::verb::post, "/v1/jobs/a/b", route_kind::not_found, "", "", true},
      {http::verb::get, "/", route_kind::not_found, "", "", true},
      {http::verb::get, "/healthzz", route_kind::not_found, "", "", true},
  };
  for (const row& r : rows) {
    SCOPED_TRACE(std::string(http::to_string(r.m)) + " " + r.target);
    const route got = route_request(r.m, r.target);
    EXPECT_EQ(got.kind, r.kind);
    EXPECT_EQ(got.name, r.name);
    EXPECT_EQ(got.allow, r.allow);
    EXPECT_EQ(got.needs_auth, r.auth);
  }
}

// A signal's name is any name, "replay" and "signals" too: routed by
// segment, never taken for another route by its suffix.
TEST(RouteRequest, ASignalNamedLikeARouteIsStillASignal) {
  const std::string id(32, 'a');
  for (const std::string name : {"replay", "signals", "approve", "dead"}) {
    const std::string target = "/v1/jobs/" + id + "/signals/" + name;  // the route's views are into it
    const route r = route_request(http::verb::post, target);
    EXPECT_EQ(r.kind, route_kind::signal_job) << name;
    EXPECT_EQ(r.name, id) << name;
    EXPECT_EQ(r.item, name);
  }
  EXPECT_EQ(route_request(http::verb::post, "/v1/jobs/" + id + "/replay").kind, route_kind::replay_job);
  EXPECT_EQ(route_request(http::verb::post, "/v1/jobs/" + id + "/signals/a/replay").kind, route_kind::not_found);
  EXPECT_EQ(route_request(http::verb::post, "/v1/jobs/" + id + "/x/replay").kind, route_kind::not_found);
  EXPECT_EQ(route_request(http::verb::post, "/v1/jobs//replay").kind, route_kind::not_found);
  EXPECT_EQ(route_request(http::verb::get, "/v1/jobs/" + id + "/signals/replay").kind, route_kind::method_not_allowed);
}

TEST(JudgeFraming, OneLengthOrChunkedLastAndAlone) {
  struct row {
    std::vector<std::pair<http::field, const char*>> fields;
    framing want;
  };
  const std::vector<row> rows = {
      {{}, framing::ok},
      {{{http::field::content_length, "3"}}, framing::ok},
      {{{http::field::transfer_encoding, "chunked"}}, framing::ok},
      {{{http::field::transfer_encoding, "Chunked"}}, framing::ok},
      {{{http::field::content_length, "3"}, {http::field::content_length, "3"}}, framing::ambiguous},
      {{{http::field::content_length, "3"}, {http::field::content_length, "4"}}, framing::ambiguous},
      {{{http::field::content_length, "3, 3"}}, framing::ambiguous},
      {{{http::field::transfer_encoding, "chunked, gzip"}}, framing::ambiguous},
      {{{http::field::transfer_encoding, "chunked"}, {http::field::transfer_encoding, "gzip"}}, framing::ambiguous},
      {{{http::field::transfer_encoding, "identity"}}, framing::ambiguous},
      {{{http::field::transfer_encoding, ""}}, framing::ambiguous},
      {{{http::field::transfer_encoding, "gzip, chunked"}}, framing::unsupported},
      {{{http::field::transfer_encoding, "gzip"}, {http::field::transfer_encoding, "chunked"}}, framing::unsupported},
  };
  for (const row& r : rows) {
    http::fields f;
    std::string shown;
    for (const auto& [name, value] : r.fields) {
      f.insert(name, value);
      shown += std::string(http::to_string(name)) + ": " + value + "; ";
    }
    EXPECT_EQ(judge_framing(f), r.want) << shown;
  }
}

TEST(BearerAuthorized, SchemeTokenAndNoAuth) {
  EXPECT_TRUE(bearer_authorized("", ""));  // no token configured: open
  EXPECT_TRUE(bearer_authorized("Bearer s3cret", "s3cret"));
  EXPECT_TRUE(bearer_authorized("bearer   s3cret  ", "s3cret"));
  EXPECT_FALSE(bearer_authorized("", "s3cret"));
  EXPECT_FALSE(bearer_authorized("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(bearer_authorized("Bearer s3cret2", "s3cret"));
  EXPECT_FALSE(bearer_authorized("Basic s3cret", "s3cret"));
  EXPECT_FALSE(bearer_authorized("Bearer", "s3cret"));
}

TEST(RequestAuthorized, TheAccessTokenOpensEverythingTheAdminTokenOnlyReads) {
  const auto ok = [](std::string_view auth, bool read) { return request_authorized(auth, read, "user", "admin"); };
  EXPECT_TRUE(ok("Bearer user", true));
  EXPECT_TRUE(ok("Bearer user", false));
  EXPECT_TRUE(ok("Bearer admin", true)) << "who may pause a queue may look at it";
  EXPECT_FALSE(ok("Bearer admin", false)) << "never a submit, cancel or signal: it would reach a handler";
  EXPECT_FALSE(ok("Bearer other", true));
  EXPECT_FALSE(ok("", true));
  EXPECT_FALSE(request_authorized("", true, "user", "")) << "no admin token configured: an empty one opens nothing";
  EXPECT_TRUE(request_authorized("", false, "", "admin")) << "no access token configured: open";
}

// Exact-size heap copies: Beast 1.81's iequals read one byte past both when
// only the last character's case differed (ASan shows it under the asan preset).
TEST(Iequals, AsciiCaseOnlyAndNeverPastEitherEnd) {
  const auto heap = [](std::string_view s) {
    auto p = std::make_unique<char[]>(s.size());
    std::copy(s.begin(), s.end(), p.get());
    return p;
  };
  const auto a = heap("localhost"), b = heap("localHosT");
  EXPECT_TRUE(iequals({a.get(), 9}, {b.get(), 9}));
  EXPECT_FALSE(iequals({a.get(), 9}, {b.get(), 8}));
  EXPECT_FALSE(iequals("localhosu", "localhost"));
  EXPECT_FALSE(iequals("\xc3\xa9", "\xc3\x89")) << "ASCII only: no locale folds bytes";
  EXPECT_TRUE(iequals("", ""));
}

TEST(HostAllowed, AddressesAndLocalhostAlwaysOtherNamesOnlyWhenAllowed) {
  const std::vector<std::string> none, allowed{"hourglass.internal", ".jobs.example", "HOST.Example"};
  struct row {
    std::string_view host;
    bool by_default, with_allowed;
  };
  for (const row& r : std::vector<row>{
           {"", true, true},  // HTTP/1.0 from a program: no Host at all
           {"127.0.0.1:8080", true, true},
           {"127.0.0.1", true, true},
           {"10.1.2.3:80", true, true},  // any address: an address cannot be rebound
           {"[::1]:8080", true, true},
           {"[::1]", true, true},
           {"[2001:db8::7]:9", true, true},
           {"localhost:8080", true, true},
           {"LocalHost", true, true},
           {"localhost.:8080", true, true},
           {"dash.localhost:8080", true, true},  // RFC 6761: always the loopback
           {"evil.example:8080", false, false},  // a rebound name
           {"evil.example", false, false},
           {"localhost.evil.example", false, false},
           {"evillocalhost", false, false},
           {"127.0.0.1.evil.example", false, false},
           {"hourglass.internal:8080", false, true},
           {"HOURGLASS.internal", false, true},
           {"x.hourglass.internal", false, false},  // exactly, without a leading dot
           {"jobs.example", false, true},           // a leading dot: the name and its subdomains
           {"a.b.jobs.example:1", false, true},
           {"notjobs.example", false, false},
           {"host.example", false, true},
           {"user@localhost:8080", false, false},  // not host[:port]
           {"localhost:80/x", false, false},
           {"localhost:99999", false, false},
           {"localhost:http", false, false},
           {"[::1", false, false},
           {" localhost:8080 ", true, true},  // surrounding spaces are the field's, not the name's
       }) {
    EXPECT_EQ(host_allowed(r.host, none), r.by_default) << "'" << r.host << "'";
    EXPECT_EQ(host_allowed(r.host, allowed), r.with_allowed) << "'" << r.host << "' with names allowed";
  }
  EXPECT_TRUE(host_allowed("evil.example:8080", {"*"})) << "* allows any name";
}

TEST(SameOriginOrNone, OnlyThisDaemonsOwnPagesOrNoPageAtAll) {
  EXPECT_TRUE(same_origin_or_none("", "127.0.0.1:8080")) << "curl, a program: no Origin";
  EXPECT_TRUE(same_origin_or_none("http://127.0.0.1:8080", "127.0.0.1:8080"));
  EXPECT_TRUE(same_origin_or_none("HTTP://Host.Example:8080", "host.example:8080"));
  EXPECT_TRUE(same_origin_or_none("http://host.example", "host.example:80")) << "the default port written or not";
  EXPECT_TRUE(same_origin_or_none("http://host.example:80", "host.example"));
  EXPECT_TRUE(same_origin_or_none("http://[::1]:8080", "[::1]:8080"));
  EXPECT_FALSE(same_origin_or_none("http://evil.example", "127.0.0.1:8080"));
  EXPECT_FALSE(same_origin_or_none("http://127.0.0.1:9090", "127.0.0.1:8080")) << "another port is another origin";
  EXPECT_TRUE(same_origin_or_none("https://ops.example", "ops.example")) << "behind a TLS proxy that keeps Host";
  EXPECT_TRUE(same_origin_or_none("https://ops.example", "ops.example:443"));
  EXPECT_FALSE(same_origin_or_none("https://ops.example", "ops.example:80")) << "another port";
  EXPECT_FALSE(same_origin_or_none("ftp://127.0.0.1:8080", "127.0.0.1:8080"));
  EXPECT_FALSE(same_origin_or_none("null", "127.0.0.1:8080")) << "a sandboxed or file: page";
  EXPECT_FALSE(same_origin_or_none("http://127.0.0.1:8080", "")) << "no Host to compare with";
  EXPECT_FALSE(same_origin_or_none("http://127.0.0.1:8080.evil.example", "127.0.0.1:8080"));
}

TEST(PrefersAsync, AmongOtherPreferences) {
  EXPECT_TRUE(prefers_async("respond-async"));
  EXPECT_TRUE(prefers_async("return=minimal, Respond-Async; wait=10"));
  EXPECT_FALSE(prefers_async("wait=10"));
  EXPECT_FALSE(prefers_async("respond-asynchronously"));
  EXPECT_FALSE(prefers_async(""));
}

http::fields fields(std::initializer_list<std::pair<const char*, const char*>> hs) {
  http::fields f;
  for (const auto& [k, v] : hs) f.insert(k, v);
  return f;
}

constexpr budget_limits kLimits{3s, 20s};

TEST(ReadBudget, DefaultTightestAndClamp) {
  EXPECT_EQ(read_budget(fields({}), kLimits).budget, 3s);
  EXPECT_EQ(read_budget(fields({{"Request-Timeout", "1500u"}}), kLimits).budget, 1500us);
  EXPECT_EQ(read_budget(fields({{"Request-Timeout", "0n"}}), kLimits).budget, 0ns);
  EXPECT_EQ(
      read_budget(
          fields({{"Request-Timeout", "5S"}, {"grpc-timeout", "300m"}, {"X-Envoy-Expected-Rq-Timeout-Ms", "1000"}}),
          kLimits)
          .budget,
      300ms);
  EXPECT_EQ(read_budget(fields({{"Request-Timeout", "1H"}}), kLimits).budget, 20s);
}

TEST(ReadBudget, MalformedOrRepeatedHeadersSpoilTheRequest) {
  const auto bad = read_budget(fields({{"Request-Timeout", "1S"}, {"grpc-timeout", "soon"}}), kLimits);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.message, "malformed grpc-timeout header");
  const auto dup = read_budget(fields({{"Request-Timeout", "1S"}, {"Request-Timeout", "2S"}}), kLimits);
  EXPECT_FALSE(dup.ok);
  EXPECT_EQ(dup.message, "a budget header appears more than once");
}

TEST(ReadBudget, AsyncFreshness) {
  const auto plain = read_budget(fields({{"Prefer", "respond-async"}}), kLimits);
  EXPECT_TRUE(plain.async);
  EXPECT_EQ(plain.freshness, 3s);  // default budget
  const auto fresh = read_budget(fields({{"Prefer", "respond-async"}, {"Job-Freshness", "5S"}}), kLimits);
  EXPECT_EQ(fresh.freshness, 5s);
  EXPECT_EQ(read_budget(fields({{"Prefer", "respond-async"}, {"Job-Freshness", "2M"}}), kLimits).freshness, 20s);
  const auto bad = read_budget(fields({{"Prefer", "respond-async"}, {"Job-Freshness", "later"}}), kLimits);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.message, "malformed Job-Freshness header");
  // A sync request ignores Job-Freshness.
  EXPECT_TRUE(read_budget(fields({{"Job-Freshness", "later"}}), kLimits).ok);
  // A route of async jobs only (bulk) reads it without Prefer.
  const auto bulk = read_budget(fields({{"Job-Freshness", "4S"}}), kLimits, true);
  EXPECT_TRUE(bulk.async);
  EXPECT_EQ(bulk.freshness, 4s);
  EXPECT_FALSE(read_budget(fields({{"Job-Freshness", "later"}}), kLimits, true).ok);
}

TEST(ReadJobRetry, TheHandlersPolicyUnlessTheRequestSaysOtherwise) {
  const job_retry_policy handler{.max_attempts = 3, .base = 1s, .cap = 60s};
  const auto none = read_job_retry(fields({}), handler);
  ASSERT_TRUE(none.ok);
  EXPECT_EQ(none.policy.max_attempts, 3);
  EXPECT_EQ(none.policy.base, 1s);
  EXPECT_EQ(none.policy.cap, 60s);
  EXPECT_EQ(none.deadline, duration::max()) << "no overall deadline unless asked";
  const auto all = read_job_retry(fields({{"Job-Attempts", "5"}, {"Job-Backoff", "200m, 10S"}, {"Job-Deadline", "2M"}}),
                                  handler);
  ASSERT_TRUE(all.ok) << all.message;
  EXPECT_EQ(all.policy.max_attempts, 5);
  EXPECT_EQ(all.policy.base, 200ms);
  EXPECT_EQ(all.policy.cap, 10s);
  EXPECT_EQ(all.deadline, 2min);
  const auto base_only = read_job_retry(fields({{"Job-Backoff", "500m"}}), handler);
  EXPECT_EQ(base_only.policy.base, 500ms);
  EXPECT_EQ(base_only.policy.cap, 60s) << "the handler's cap";
  EXPECT_EQ(read_job_retry(fields({{"Job-Backoff", "2M"}}), handler).policy.cap, 2min) << "raised to the base";
  EXPECT_EQ(read_job_retry(fields({{"Job-Attempts", " 1 "}}), handler).policy.max_attempts, 1) << "no retries";
  EXPECT_TRUE(all.policy.jitter) << "full jitter unless asked";
}

TEST(ReadJobRetry, AParameterTurnsTheJitterOffOrBackOn) {
  const job_retry_policy handler{.max_attempts = 3, .base = 1s, .cap = 60s};
  const auto fixed = read_job_retry(fields({{"Job-Backoff", "2S, 2S; jitter=none"}}), handler);
  ASSERT_TRUE(fixed.ok) << fixed.message;
  EXPECT_FALSE(fixed.policy.jitter);
  EXPECT_EQ(fixed.policy.base, 2s);
  EXPECT_EQ(fixed.policy.cap, 2s);
  const auto spaced = read_job_retry(fields({{"Job-Backoff", "500m ;  Jitter = NONE "}}), handler);
  ASSERT_TRUE(spaced.ok) << spaced.message;
  EXPECT_FALSE(spaced.policy.jitter) << "spaces and case aside";
  EXPECT_EQ(spaced.policy.base, 500ms);
  const job_retry_policy unjittered{.max_attempts = 3, .base = 1s, .cap = 60s, .jitter = false};
  EXPECT_FALSE(read_job_retry(fields({{"Job-Backoff", "3S"}}), unjittered).policy.jitter) << "the handler's, left out";
  EXPECT_TRUE(read_job_retry(fields({{"Job-Backoff", "3S; jitter=full"}}), unjittered).policy.jitter);
}

TEST(ReadJitterParameter, OnlyJitterFullOrNone) {
  EXPECT_EQ(read_jitter_parameter("jitter=full"), std::optional<bool>(true));
  EXPECT_EQ(read_jitter_parameter(" jitter = none "), std::optional<bool>(false));
  for (const char* bad :
       {"", "jitter", "jitter=", "=none", "jitter=none;", "jitter=0", "jitters=none", "jitter=nonee"}) {
    EXPECT_EQ(read_jitter_parameter(bad), std::nullopt) << bad;
  }
}

TEST(ReadJobRetry, MalformedHeadersAreRefusedNamingTheHeader) {
  const job_retry_policy handler{};
  struct row {
    std::vector<std::pair<const char*, const char*>> hs;
    const char* error;
    const char* message;
  };
  const std::vector<row> rows = {
      {{{"Job-Attempts", "0"}}, "invalid_retry_policy", "Job-Attempts must be an integer from 1 to 100"},
      {{{"Job-Attempts", "101"}}, "invalid_retry_policy", "Job-Attempts must be an integer from 1 to 100"},
      {{{"Job-Attempts", "3x"}}, "invalid_retry_policy", "Job-Attempts must be an integer from 1 to 100"},
      {{{"Job-Backoff", "soon"}}, "invalid_retry_policy", "Job-Backoff must be BASE[, CAP][; jitter=none] (30S, 500m)"},
      {{{"Job-Backoff", "1S, x"}},
       "invalid_retry_policy",
       "Job-Backoff must be BASE[, CAP][; jitter=none] (30S, 500m)"},
      {{{"Job-Backoff", "2S, 1S"}}, "invalid_retry_policy", "Job-Backoff has its cap below its base"},
      {{{"Job-Backoff", "1S; jitter=some"}},
       "invalid_retry_policy",
       "Job-Backoff parameter must be jitter=full or jitter=none"},
      {{{"Job-Backoff", "1S; spread=none"}},
       "invalid_retry_policy",
       "Job-Backoff parameter must be jitter=full or jitter=none"},
      {{{"Job-Backoff", "1S; jitter=none; jitter=full"}},
       "invalid_retry_policy",
       "Job-Backoff parameter must be jitter=full or jitter=none"},
      {{{"Job-Backoff", "1S;"}}, "invalid_retry_policy", "Job-Backoff parameter must be jitter=full or jitter=none"},
      {{{"Job-Backoff", "; jitter=none"}},
       "invalid_retry_policy",
       "Job-Backoff must be BASE[, CAP][; jitter=none] (30S, 500m)"},
      {{{"Job-Deadline", "1 hour"}},
       "invalid_timeout",
       "Job-Deadline is not a duration (grpc-timeout syntax: 30S, 500m)"},
      {{{"Job-Attempts", "2"}, {"Job-Attempts", "3"}}, "invalid_retry_policy", "a retry header appears more than once"},
  };
  for (const row& r : rows) {
    http::fields f;
    for (const auto& [k, v] : r.hs) f.insert(k, v);
    const auto got = read_job_retry(f, handler);
    SCOPED_TRACE(r.message);
    EXPECT_FALSE(got.ok);
    EXPECT_EQ(got.error, r.error);
    EXPECT_EQ(got.message, r.message);
  }
}

// A retry is a delay: a backoff past --max-delay would hold a job's record
// (and its share of the store's bounds) for as long as a client asked.
TEST(ReadJobRetry, ABackoffPastMaxDelayIsRefused) {
  const job_retry_policy handler{};
  const auto far = read_job_retry(fields({{"Job-Backoff", "700H"}}), handler, 720h);
  EXPECT_TRUE(far.ok) << "within it";
  const auto past = read_job_retry(fields({{"Job-Backoff", "1S, 721H"}}), handler, 720h);
  EXPECT_FALSE(past.ok);
  EXPECT_EQ(past.error, "invalid_retry_policy");
  EXPECT_EQ(past.message, "Job-Backoff is past --max-delay");
  EXPECT_FALSE(read_job_retry(fields({{"Job-Backoff", "721H"}}), handler, 720h).ok) << "a base alone raises the cap";
}

TEST(ReadBudget, IdleTimeoutForSyncAndAsync) {
  EXPECT_EQ(read_budget(fields({}), kLimits).idle_limit, duration::max()) << "none stated: no idle limit";
  EXPECT_EQ(read_budget(fields({{"Job-Idle-Timeout", "250m"}}), kLimits).idle_limit, 250ms);
  EXPECT_EQ(read_budget(fields({{"Prefer", "respond-async"}, {"Job-Idle-Timeout", "2S"}}), kLimits).idle_limit, 2s);
  // Not clamped to the budget: the absolute deadline bounds the job anyway.
  EXPECT_EQ(read_budget(fields({{"Job-Idle-Timeout", "1H"}}), kLimits).idle_limit, 1h);
  const auto bad = read_budget(fields({{"Job-Idle-Timeout", "1.5S"}}), kLimits);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.message, "malformed Job-Idle-Timeout header");
  EXPECT_FALSE(read_budget(fields({{"Job-Idle-Timeout", "0n"}}), kLimits).ok) << "no job could ever run";
  const auto dup = read_budget(fields({{"Job-Idle-Timeout", "1S"}, {"Job-Idle-Timeout", "1S"}}), kLimits);
  EXPECT_FALSE(dup.ok);
  EXPECT_EQ(dup.message, "a budget header appears more than once");
}

TEST(SyncCall, EveryStateAndEvent) {
  using S = sync_state;
  using E = sync_event;
  using A = sync_action;
  const std::vector<std::tuple<S, E, S, A>> rows = {
      {S::waiting, E::outcome, S::finished, A::answer_outcome},
      {S::waiting, E::deadline_while_queued, S::answered, A::answer_expired_queue},
      {S::waiting, E::deadline_while_running, S::grace, A::arm_grace},
      {S::waiting, E::grace_over, S::waiting, A::none},
      {S::waiting, E::peer_gone, S::caller_gone, A::cancel_job},
      {S::grace, E::outcome, S::finished, A::answer_outcome},  // stopped within the grace
      {S::grace, E::grace_over, S::answered, A::answer_expired_run},
      {S::grace, E::deadline_while_running, S::grace, A::none},
      {S::grace, E::deadline_while_queued, S::grace, A::none},
      {S::grace, E::peer_gone, S::caller_gone, A::cancel_job},
      {S::answered, E::outcome, S::finished, A::log_outcome},
      {S::answered, E::peer_gone, S::answered, A::none},
      {S::answered, E::grace_over, S::answered, A::none},
      {S::caller_gone, E::outcome, S::finished, A::log_caller_gone},
      {S::caller_gone, E::peer_gone, S::caller_gone, A::none},
      {S::caller_gone, E::deadline_while_running, S::caller_gone, A::none},
      {S::finished, E::outcome, S::finished, A::none},
      {S::finished, E::peer_gone, S::finished, A::none},
      // streaming
      {S::waiting, E::first_output, S::streaming, A::start_stream},
      {S::grace, E::first_output, S::grace, A::none},  // the deadline came first: a 504, not a stream
      {S::answered, E::first_output, S::answered, A::none},
      {S::caller_gone, E::first_output, S::caller_gone, A::none},
      {S::streaming, E::first_output, S::streaming, A::none},
      {S::streaming, E::outcome, S::finished, A::end_stream},
      {S::streaming, E::deadline_while_running, S::stream_grace, A::arm_grace},
      {S::streaming, E::deadline_while_queued, S::streaming, A::none},
      {S::streaming, E::grace_over, S::streaming, A::none},
      {S::streaming, E::peer_gone, S::caller_gone, A::cancel_job},
      {S::stream_grace, E::outcome, S::finished, A::end_stream},  // stopped within the grace
      {S::stream_grace, E::grace_over, S::answered, A::end_stream_expired},
      {S::stream_grace, E::deadline_while_running, S::stream_grace, A::none},
      {S::stream_grace, E::peer_gone, S::caller_gone, A::cancel_job},
      {S::stream_grace, E::first_output, S::stream_grace, A::none},
      // a streaming handler's ok outcome ends a stream, begun or not
      {S::waiting, E::outcome_of_stream_ok, S::finished, A::end_stream},
      {S::grace, E::outcome_of_stream_ok, S::finished, A::end_stream},
      {S::streaming, E::outcome_of_stream_ok, S::finished, A::end_stream},
      {S::stream_grace, E::outcome_of_stream_ok, S::finished, A::end_stream},
      {S::answered, E::outcome_of_stream_ok, S::finished, A::log_outcome},
      {S::caller_gone, E::outcome_of_stream_ok, S::finished, A::log_caller_gone},
      {S::finished, E::outcome_of_stream_ok, S::finished, A::none},
      // the connection closed under the job: nobody to answer, logged as 499
      {S::waiting, E::outcome_after_close, S::finished, A::log_caller_gone},
      {S::grace, E::outcome_after_close, S::finished, A::log_caller_gone},
      {S::streaming, E::outcome_after_close, S::finished, A::log_caller_gone},
      {S::stream_grace, E::outcome_after_close, S::finished, A::log_caller_gone},
      {S::answered, E::outcome_after_close, S::finished, A::log_outcome},  // it was answered before the close
      {S::caller_gone, E::outcome_after_close, S::finished, A::log_caller_gone},
      {S::finished, E::outcome_after_close, S::finished, A::none},
  };
  for (const auto& [from, ev, to, act] : rows) {
    SCOPED_TRACE(::testing::Message() << "state " << static_cast<int>(from) << ", event " << static_cast<int>(ev));
    const sync_step got = on_sync_event(from, ev);
    EXPECT_EQ(got.next, to);
    EXPECT_EQ(got.action, act);
  }
}

TEST(SyncCall, StillOpenUntilAnsweredOrGone) {
  EXPECT_TRUE(still_open(sync_state::waiting));
  EXPECT_TRUE(still_open(sync_state::grace));
  EXPECT_TRUE(still_open(sync_state::streaming));
  EXPECT_TRUE(still_open(sync_state::stream_grace));
  EXPECT_FALSE(still_open(sync_state::answered));
  EXPECT_FALSE(still_open(sync_state::caller_gone));
  EXPECT_FALSE(still_open(sync_state::finished));
}

// Whatever happens, a call answers its caller at most once (a status line, or
// a stream's end after its start), never ends a stream it did not start, and
// ends finished once its outcome is in.
TEST(SyncCall, AnswersAtMostOnceOnAnyPath) {
  const sync_event all[] = {sync_event::deadline_while_queued, sync_event::deadline_while_running,
                            sync_event::grace_over, sync_event::peer_gone, sync_event::first_output};
  for (const auto a : all) {
    for (const auto b : all) {
      for (const auto c : all) {
        for (const auto d : all) {
          for (const auto last :
               {sync_event::outcome, sync_event::outcome_of_stream_ok, sync_event::outcome_after_close}) {
            sync_state s = sync_state::waiting;
            int answers = 0;
            bool streaming = false;
            for (const auto e : {a, b, c, d, last}) {
              const sync_step st = on_sync_event(s, e);
              s = st.next;
              switch (st.action) {
                case sync_action::start_stream:
                  EXPECT_FALSE(streaming);
                  EXPECT_EQ(answers, 0);
                  streaming = true;
                  break;
                case sync_action::end_stream:  // a stream that wrote nothing begins as it ends
                  EXPECT_TRUE(streaming || e == sync_event::outcome_of_stream_ok);
                  ++answers;
                  break;
                case sync_action::end_stream_expired:
                  EXPECT_TRUE(streaming);
                  ++answers;
                  break;
                case sync_action::answer_outcome:
                case sync_action::answer_expired_queue:
                case sync_action::answer_expired_run:
                  EXPECT_FALSE(streaming) << "a status line after a stream began";
                  ++answers;
                  break;
                default: break;
              }
            }
            EXPECT_LE(answers, 1);
            EXPECT_EQ(s, sync_state::finished);
          }
        }
      }
    }
  }
}

TEST(SyncCall, OutcomeEvent) {
  EXPECT_EQ(outcome_event(false, false, true), sync_event::outcome);
  EXPECT_EQ(outcome_event(false, false, false), sync_event::outcome);
  EXPECT_EQ(outcome_event(false, true, true), sync_event::outcome_of_stream_ok);
  EXPECT_EQ(outcome_event(false, true, false), sync_event::outcome) << "a failed stream that never began is a status";
  EXPECT_EQ(outcome_event(true, true, true), sync_event::outcome_after_close);
  EXPECT_EQ(outcome_event(true, false, false), sync_event::outcome_after_close);
}

TEST(ReadErrors, SortedFromBeastAndTheSocket) {
  namespace net = boost::asio;
  EXPECT_EQ(sort_read_error({}), read_error::none);
  EXPECT_EQ(sort_read_error(http::error::header_limit), read_error::header_limit);
  EXPECT_EQ(sort_read_error(http::error::body_limit), read_error::body_limit);
  EXPECT_EQ(sort_read_error(http::error::partial_message), read_error::partial_message);
  EXPECT_EQ(sort_read_error(http::error::end_of_stream), read_error::end_of_stream);
  EXPECT_EQ(sort_read_error(boost::beast::error::timeout), read_error::timeout);
  EXPECT_EQ(sort_read_error(http::error::bad_chunk), read_error::malformed);
  EXPECT_EQ(sort_read_error(http::error::bad_method), read_error::malformed);
  EXPECT_EQ(sort_read_error(net::error::connection_reset), read_error::transport);
  EXPECT_EQ(sort_read_error(net::error::operation_aborted), read_error::transport);
}

TEST(ReadErrors, EveryReadAfterTheTimerClosedTheSocketIsATimeout) {
  namespace net = boost::asio;
  EXPECT_EQ(read_as_seen({}, false), boost::system::error_code{});
  EXPECT_EQ(read_as_seen(net::error::connection_reset, false), net::error::connection_reset);
  // Completed from pipelined bytes already buffered: no request is started.
  EXPECT_EQ(sort_read_error(read_as_seen({}, true)), read_error::timeout);
  EXPECT_EQ(judge_read(read_phase::headers, sort_read_error(read_as_seen({}, true))), read_verdict::close);
  EXPECT_EQ(judge_read(read_phase::body, sort_read_error(read_as_seen({}, true))), read_verdict::close);
  EXPECT_EQ(sort_read_error(read_as_seen(net::error::bad_descriptor, true)), read_error::timeout);
}

TEST(ReadErrors, WhatEachPhaseAnswers) {
  using E = read_error;
  using V = read_verdict;
  const std::vector<std::tuple<E, V, V>> rows = {
      // error, while reading headers, while reading the body
      {E::none, V::go_on, V::go_on},
      {E::header_limit, V::headers_too_large, V::malformed_body},
      {E::body_limit, V::malformed_request, V::body_too_large},
      {E::partial_message, V::malformed_request, V::close},  // half a body: the caller went away
      {E::malformed, V::malformed_request, V::malformed_body},
      {E::end_of_stream, V::close, V::close},
      {E::timeout, V::close, V::close},
      {E::transport, V::close, V::close},
  };
  for (const auto& [e, headers, body] : rows) {
    SCOPED_TRACE(::testing::Message() << "error " << static_cast<int>(e));
    EXPECT_EQ(judge_read(read_phase::headers, e), headers);
    EXPECT_EQ(judge_read(read_phase::body, e), body);
  }
}

TEST(KeepAlive, OneRuleForEveryAnswer) {
  EXPECT_TRUE(keeps_alive({}));
  EXPECT_FALSE(keeps_alive({.requested = false}));
  EXPECT_FALSE(keeps_alive({.closing = true}));
  EXPECT_FALSE(keeps_alive({.body_unread = true})) << "its unread body would be taken for the next request";
  EXPECT_FALSE(keeps_alive({.draining = true}));
  EXPECT_FALSE(keeps_alive({.http10_stream = true})) << "an HTTP/1.0 stream's body ends with the connection";
}

TEST(JobBounds, SyncByTheCallerAsyncByTheHandler) {
  const job_bounds sync = bounds_of_job(false, 800ms, 30s, duration::max(), duration::max());
  EXPECT_EQ(sync.budget, 800ms);
  EXPECT_EQ(sync.idle_limit, duration::max());
  const job_bounds async = bounds_of_job(true, 800ms, 30s, 5s, 2s);
  EXPECT_EQ(async.budget, 30s) << "an async job runs within its handler's run limit";
  EXPECT_EQ(async.idle_limit, 2s) << "the request may tighten the handler's idle limit";
  EXPECT_EQ(bounds_of_job(false, 1s, 30s, 1s, 3s).idle_limit, 1s) << "but never loosen it";
}

TEST(GateJobRequest, ChecksInOrder) {
  job_request_facts ok;
  ok.handler_known = true;
  ok.content_length = 10;
  ok.max_body = 10;
  ok.budget_ok = true;
  ok.body_complete = true;
  EXPECT_EQ(gate_job_request(ok), job_gate::read_body);

  auto with = [&](auto change) {
    job_request_facts f = ok;
    change(f);
    return gate_job_request(f);
  };
  EXPECT_EQ(with([](auto& f) {
              f.handler_known = false;
              f.budget_ok = false;
              f.draining = true;
            }),
            job_gate::unknown_handler)
      << "an unknown handler is 404 whatever else is wrong";
  EXPECT_EQ(with([](auto& f) {
              f.content_length = 11;
              f.budget_ok = false;
            }),
            job_gate::body_too_large)
      << "413 before the budget headers are judged";
  EXPECT_EQ(with([](auto& f) { f.content_length.reset(); }), job_gate::read_body) << "chunked: judged while read";
  EXPECT_EQ(with([](auto& f) {
              f.budget_ok = false;
              f.draining = true;
            }),
            job_gate::invalid_budget);
  EXPECT_EQ(with([](auto& f) {
              f.draining = true;
              f.expects_continue = true;
              f.body_complete = false;
            }),
            job_gate::shutting_down)
      << "no 100 Continue for a request that will be refused";
  EXPECT_EQ(with([](auto& f) {
              f.expects_continue = true;
              f.body_complete = false;
            }),
            job_gate::continue_then_read_body);
  EXPECT_EQ(with([](auto& f) { f.expects_continue = true; }), job_gate::read_body)
      << "the body is already here: no 100 Continue";
}

}  // namespace
}  // namespace hourglass::server::detail
