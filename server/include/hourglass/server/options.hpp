// hourglassd's settings: one options struct with defaults, filled from the
// command line and a TOML file by config.hpp, or by an embedder directly.
// The names match the command-line keys (docs/reference/cli.md, "hourglassd").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hourglass/job_retry.hpp"
#include "hourglass/time.hpp"

namespace hourglass::server {

enum class policy { hourglass, fifo };

// One per CPU (at least 1): server_options' default worker count.
std::size_t default_workers() noexcept;

// A periodic job: `handler` run with `body` at every fire of `cron` (five
// fields, or a macro such as @hourly) in `zone` (a tzdata name, or UTC).
struct schedule_options {
  std::string name;
  std::string cron;
  std::string zone = "UTC";
  std::string handler;
  std::string body;
  std::string content_type = "application/octet-stream";
  std::optional<duration> freshness;  // how long a fire is worth starting; none: until the next fire
  bool allow_overlap = false;         // false: a fire is skipped while the previous one is queued or running
};

struct server_options {
  // --listen ADDR:PORT. IPv4 "a.b.c.d:p" or IPv6 "[::1]:p"; port 0 picks a free one.
  std::string listen = "127.0.0.1:8080";
  std::size_t workers = default_workers();  // --workers; at least 1
  std::size_t io_threads = 2;               // --io-threads: threads serving sockets
  std::size_t queue_capacity = 1024;

  // Budgets. A request without a budget header gets default_budget; any
  // budget is clamped to max_budget; less than min_budget left at admission
  // is refused (deadline_exceeded/admission).
  duration default_budget = std::chrono::seconds(10);
  duration max_budget = std::chrono::seconds(60);
  duration min_budget = std::chrono::milliseconds(1);

  // Upstreams the `call` handler may reach: NAME -> http://host:port[/prefix].
  std::map<std::string, std::string> upstreams;
  // Kept back from the remaining budget when calling an upstream.
  duration call_reserve = std::chrono::milliseconds(5);
  // Each upstream's circuit breaker opens after this many failed calls in a
  // row (or half of at least 20 calls in 10 s failing), fails calls at once
  // for breaker_open, then lets one probe through.
  std::size_t breaker_failures = 5;
  duration breaker_open = std::chrono::seconds(5);

  duration drain_timeout = std::chrono::seconds(10);
  std::size_t max_body = 1024 * 1024;  // bytes
  policy scheduling = policy::hourglass;

  // Authentication: a file holding the bearer token (surrounding whitespace
  // ignored). Without it, a non-loopback listen address is refused unless
  // allow_unauthenticated.
  std::string auth_token_file;
  bool allow_unauthenticated = false;
  // The Host names it answers to (--allowed-host, repeatable) besides IP
  // addresses, `localhost` and names under `.localhost`: any other Host is
  // refused 421 before anything else, so a page whose name was rebound to
  // this daemon's address cannot drive it (DNS rebinding). ".example.com":
  // that name and its subdomains; "*": any name.
  std::vector<std::string> allowed_hosts;
  // The admin token's file: pausing and resuming queues need it (reads need
  // only the token above). Without it, those actions are refused (403).
  std::string admin_token_file;

  // Slow-client protection.
  duration header_timeout = std::chrono::seconds(10);  // first byte -> end of headers
  duration body_timeout = std::chrono::seconds(30);    // end of headers -> end of body
  duration write_timeout = std::chrono::seconds(30);   // each response write: a reader that stops reading is cut off
  duration idle_timeout = std::chrono::seconds(60);    // keep-alive wait for the next request
  std::size_t max_connections = 1024;                  // more are accepted and closed at once

  // GET /metrics renders at most once per this on the server's clock; other
  // scrapes get that page (its values at most this old). Zero: every scrape renders.
  duration metrics_cache = std::chrono::seconds(1);

  // Async jobs: results are kept this long after they finish, and at most
  // this many jobs (finished or not) are remembered.
  duration async_ttl = std::chrono::minutes(5);
  std::size_t async_max_jobs = 10000;
  // The largest result an async job may keep (--max-result): a larger one
  // ends it error/result_too_large. And the most bytes of results the
  // memory store holds at once (--async-max-result-bytes): past it the
  // oldest finished jobs are forgotten first, as past --async-max-jobs.
  std::size_t max_result = 1024 * 1024;
  // In memory, jobs delayed or waiting for a retry (--async-max-scheduled)
  // are bounded apart from --async-max-jobs: jobs due far ahead cannot
  // refuse work that could start now.
  std::size_t async_max_scheduled = 10000;
  std::size_t async_max_result_bytes = 256 * 1024 * 1024;
  // The furthest Job-Delay / Job-Not-Before may put an async job's start.
  duration max_delay = std::chrono::hours(24 * 30);
  // How far a family of child jobs may grow (Job-Parent, enqueue_child): a
  // job without a parent is at depth 0; a child past either bound is
  // refused (409 too_deep, too_many_children).
  std::size_t max_job_depth = 64;
  std::size_t max_children = 1000;
  // Fleet: listings walked by SCAN (a final state, `finished`, `waiting`,
  // any state) each read up to 10,000 keys of the broker: at most this many
  // a second per daemon (a burst of as many); more: 429 too_many_listings.
  std::size_t max_list_scans = 10;
  // Periodic jobs (--schedule; [[schedule]] in the config file).
  std::vector<schedule_options> schedules;
  // Async jobs' retry policies by handler (--retry NAME=ATTEMPTS[,BASE[,CAP]];
  // [retry] NAME = "..." in the file): over the one it was registered with.
  std::map<std::string, job_retry_policy> handler_retries;

  // Fleet mode (docs/fleet.md): with a broker, async jobs live
  // on a durable Redis Streams queue that many daemons share.
  std::string broker;             // --broker redis://HOST:PORT[/DB] or redis+cluster://...; empty: in memory
  std::string queue = "default";  // --queue
  std::size_t queue_shards = 1;   // --queue-shards: the queue over this many streams (1 to 64)
  std::string consumer;           // --consumer; empty: <hostname>:<port>
  duration lease = std::chrono::seconds(10);
  std::size_t max_deliveries = 3;  // starts of a job whose workers died; then dead-lettered
  std::size_t prefetch = 0;        // entries held beyond --workers, waiting for a worker
  bool produce_only = false;       // --produce-only: takes, answers and cancels jobs; runs none of them
  duration result_ttl = std::chrono::hours(24);
  duration dead_ttl = std::chrono::hours(24 * 7);  // --dead-ttl: a dead-lettered job kept (for a replay)
  std::size_t dead_max = 10'000;                   // --dead-max: the dead list's bound (oldest dropped)
  bool refuse_while_paused = false;                // --refuse-while-paused: 503 queue_paused instead of enqueueing
  duration idempotency_ttl = std::chrono::hours(24);
  std::string broker_password_file;  // AUTH with its content (surrounding whitespace ignored)
  // --broker-replicas: a 202 once the master and this many replicas hold the
  // job (WAIT behind each enqueue batch); fewer within the timeout: 503.
  std::size_t broker_replicas = 0;
  duration broker_replica_timeout = std::chrono::seconds(1);  // --broker-replica-timeout
  bool builtin_handlers = true;                               // echo, sleep, spin, call
  std::string log_level = "info";                             // trace debug info warn error critical off
};

// Throws std::invalid_argument when the options cannot mean what they say:
// zero workers or io threads, a zero capacity, non-positive budgets,
// default or min budget above the max, a malformed listen address or
// upstream URL, a non-loopback address without a token (unless
// allow_unauthenticated), an unknown log level.
void validate(const server_options& options);

// Parsed "ADDR:PORT".
struct listen_endpoint {
  std::string address;
  std::uint16_t port = 0;
  bool loopback = false;
};
listen_endpoint parse_listen(const std::string& text);  // throws std::invalid_argument

// Parsed upstream URL: only plain http, a host, a port (default 80) and an
// optional path prefix.
struct upstream_url {
  std::string host;
  std::string port;
  std::string prefix;  // "" or "/something" without a trailing slash
};
upstream_url parse_upstream_url(const std::string& url);  // throws std::invalid_argument

}  // namespace hourglass::server
