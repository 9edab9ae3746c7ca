// Calls to other hourglassd daemons with the caller's remaining budget.
//
// Only upstreams configured by name can be reached: a request never names a
// host. Each call:
//  - sends POST {prefix}/v1/jobs/{handler} with Request-Timeout = remaining
//    budget - reserve, rounded down (never more than the caller had), and
//    passes `traceparent` on unchanged;
//  - is not made when that budget is not positive or is below min_budget
//    (the callee's minimum useful budget): it throws
//    stopped_error(deadline_exceeded/run) at once;
//  - runs on the server's io_context, bound to the job's context through
//    asio_cancellation: when the context stops (deadline, caller gone,
//    drain) the connect, write or read is aborted at once, the connection
//    is closed (the callee sees its caller go and cancels its own job), and
//    post_job throws stopped_error with the context's reason;
//  - reuses connections from a per-upstream keep-alive pool. A pooled
//    connection that the peer closed is retried once on a fresh one when no
//    byte of the answer had arrived;
//  - goes through the upstream's circuit breaker (circuit_breaker.hpp): while
//    it is open the call fails at once with stopped_error(rejected/
//    circuit_open), before any budget check or byte on the network; every
//    call made reports its verdict (detail/call_rules.hpp).
//
// Thread safety: post_job may be called from any number of worker threads.
// It blocks the calling thread (a job's worker) until the answer, the stop,
// or an I/O error.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/circuit_breaker.hpp"
#include "hourglass/clock.hpp"
#include "hourglass/context.hpp"
#include "hourglass/exposition.hpp"
#include "hourglass/time.hpp"

namespace boost::asio {
class io_context;
}

namespace hourglass {
class executor;
}

namespace hourglass::server {

struct upstream_response {
  unsigned status = 0;
  std::string body;
  std::string content_type;
  std::string job_outcome;  // a streamed answer's Job-Outcome trailer; empty when none came
};

struct upstream_client_options {
  duration reserve = std::chrono::milliseconds(5);
  duration min_budget = duration::zero();
  std::size_t max_idle_per_upstream = 64;
  duration pool_idle_timeout = std::chrono::seconds(30);  // below hourglassd's idle timeout
  std::size_t max_response_body = 8 * 1024 * 1024;
  // Bounds I/O when the context has no deadline (policy fifo).
  duration io_timeout = std::chrono::seconds(60);
  // Each upstream's circuit breaker (--breaker-failures, --breaker-open).
  breaker_policy breaker;
  // Times the pool's idle connections and the breakers; the daemon passes its own clock.
  // Budgets are read from each call's context, on the context's clock.
  hourglass::clock* clock = nullptr;  // nullptr: real_clock()
};

class upstream_client {
 public:
  // Throws std::invalid_argument for a malformed URL (only http://host:port[/prefix]).
  upstream_client(boost::asio::io_context& io, const std::map<std::string, std::string>& upstreams,
                  upstream_client_options options = {});
  ~upstream_client();
  upstream_client(const upstream_client&) = delete;
  upstream_client& operator=(const upstream_client&) = delete;

  bool has(std::string_view name) const noexcept;

  // Throws: stopped_error (context stopped, or budget too small to call),
  // std::invalid_argument (unknown upstream or handler name),
  // std::runtime_error (connection or protocol failure).
  upstream_response post_job(const context& ctx, std::string_view upstream, std::string_view handler, std::string body,
                             std::string_view content_type, std::string_view traceparent);

  // A hedged call (docs/guards.md, "Hedged calls"): the request goes to
  // upstreams[0]; if no success has come after hedge_after, the same request
  // goes to upstreams[1] (after 2 * hedge_after to upstreams[2], ...), each a
  // branch of first_of on `ex` under ctx's deadline less the reserve. The
  // first 2xx wins and the others are cancelled at once (their requests
  // aborted, their connections closed, so their callees cancel too). A hedge
  // is skipped when the remaining budget is below min_budget, or when the
  // hedged upstream's retry budget has no token (every call made deposits in
  // its upstream's budget: hedges are at most ~20 % of calls, Finagle-style).
  // Without a winner: the first non-2xx answer in upstream order, returned as
  // is; else the first request's stop or error. Throws like post_job.
  // A hedge waits for a free worker of `ex` to run on; with none free it runs
  // only after the branches before it.
  upstream_response post_job_hedged(executor& ex, const context& ctx, const std::vector<std::string>& upstreams,
                                    duration hedge_after, std::string_view handler, const std::string& body,
                                    std::string_view content_type, std::string_view traceparent);

  // Closes pooled idle connections (drain).
  void close_idle() noexcept;

  // The breaker of a configured upstream (nullptr for an unknown name).
  const circuit_breaker* breaker(std::string_view upstream) const noexcept;

  // Writes its families to /metrics: hourglass_circuit_state{upstream} (0
  // closed, 1 half-open, 2 open), hourglass_circuit_rejected_total{upstream}
  // and hourglass_hedges_total{outcome="won|lost|skipped"}. Nothing without
  // upstreams.
  void write_metrics(exposition_writer& w) const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace hourglass::server
