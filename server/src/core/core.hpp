// The daemon's shared state: options, I/O context, executor, handlers,
// job store, live connections, logger. Internal to the server.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <spdlog/logger.h>

#include "core/job_store.hpp"
#include "core/metrics_page.hpp"
#include "core/schedule_runner.hpp"
#include "hourglass/executor.hpp"
#include "hourglass/server/handler.hpp"
#include "hourglass/server/options.hpp"
#include "hourglass/server/upstream_client.hpp"

namespace hourglass::server::detail {

struct handler_entry {
  std::string name;
  handler_fn fn;             // for a streaming handler: its output collected into the result (async jobs)
  stream_handler_fn stream;  // set for a streaming handler: sync jobs stream what it writes
  std::string stream_content_type;
  duration run_limit = duration::max();  // async jobs
  duration min_budget = duration::zero();
  duration idle_limit = duration::max();  // the handler's own; a request may tighten it
  bool run_inline = false;                // sync jobs may run on the I/O thread (handler_options)
  job_retry_policy retry;                 // async jobs (handler_options)
  handler_metrics* metrics = nullptr;
};

class session;

// Live connections. Shared with the sessions (which deregister in their
// destructors, possibly while the io_context is being torn down).
class connection_registry {
 public:
  bool add(const std::shared_ptr<session>& s, std::size_t max);  // false when `max` are open
  void remove(const session* s) noexcept;
  std::vector<std::shared_ptr<session>> live();
  bool wait_empty(std::chrono::steady_clock::duration limit);
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable empty_;
  std::unordered_map<const session*, std::weak_ptr<session>> sessions_;
};

// How a job ended, for the log line and the response.
struct job_report {
  std::string_view handler;
  std::string_view mode;  // "sync" or "async"
  duration budget = duration::max();
  job_timings timings;
  status st;
  unsigned http_status = 0;  // 0: not answered over HTTP (async jobs)
  std::string note;          // a handler error's message, for the log only
};

// A job refused before it reached the executor.
struct refusal {
  const handler_entry& entry;
  std::string_view mode;              // "sync" or "async"
  status st;                          // rejected/reason, invalid, or deadline_exceeded/admission
  duration budget = duration::max();  // the caller's, as the log line shows it
  std::string note = {};              // for the log only
};

struct core {
  core(server_options o, hourglass::clock& clk);

  bool fifo() const noexcept { return opts.scheduling == policy::fifo; }
  const handler_entry* find_handler(std::string_view name) const;
  // What a connection's handlers run on: a strand of `io`, or with one I/O
  // thread `io` itself, which that thread already serialises (a strand's
  // lock and queue per handler were ~5 % of a small request's CPU).
  boost::asio::any_io_executor connection_executor();
  void log_job(const job_report& r) const;
  // GET /metrics: the whole page, at most opts.metrics_cache old (metrics_page.hpp).
  std::string metrics_page();
  // Every refusal is booked one way: counted under its handler
  // (stats::on_refused) and logged as a job line with the HTTP status it
  // is answered with (refuse(), job_endpoints.hpp, answers it).
  void book_refusal(const refusal& r, unsigned http_status) const;

  server_options opts;
  hourglass::clock& clk;  // the daemon's one clock: budgets, deadlines, grace, expiry, pool ages
  std::shared_ptr<spdlog::logger> log;
  boost::asio::io_context io;  // outlives everything below that posts to it
  std::unique_ptr<upstream_client> upstreams;
  std::map<std::string, handler_entry, std::less<>> handlers;
  std::string token;        // empty: no authentication
  std::string admin_token;  // empty: the admin actions are refused
  std::atomic<bool> draining{false};
  std::shared_ptr<connection_registry> connections = std::make_shared<connection_registry>();
  metrics_page_cache metrics_cache{clk, opts.metrics_cache};
  std::unique_ptr<hourglass::executor> jobs;  // drained and destroyed before the above
  // Where async jobs live: memory, or the fleet's broker (set by start()).
  // Destroyed first: the fleet's consumer feeds `jobs`, the memory store's jobs run there.
  std::unique_ptr<job_store> store;
  // Periodic jobs, through `store`: stopped and destroyed before it.
  std::unique_ptr<schedule_runner> schedules;
};

}  // namespace hourglass::server::detail
