// hourglass-bench http: open-loop HTTP load against a hourglassd
// (docs/reference/cli.md, "http").
//
// Arrivals follow a fixed schedule (rate R), whatever the server does: a
// request that finds every connection busy waits for one, and its latency is
// still measured from its scheduled send time, so queueing in front of a slow
// server shows up in the numbers instead of silently lowering the rate
// (coordinated omission).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "hourglass/histogram.hpp"
#include "hourglass/time.hpp"

namespace hourglass::support {
class json_writer;
}

namespace hourglass::bench {

struct http_options {
  std::string url;    // http://HOST:PORT/PATH
  double rate = 100;  // requests per second
  duration length = std::chrono::seconds(10);
  duration budget = std::chrono::seconds(1);  // sent as Request-Timeout
  std::string body;
  std::size_t connections = 16;  // keep-alive connections, one request in flight each
};

struct http_report {
  std::uint64_t offered = 0;                               // arrivals scheduled
  std::uint64_t sent = 0;                                  // requests written to a connection
  std::uint64_t ok = 0;                                    // 200
  std::uint64_t ok_in_deadline = 0;                        // 200 within the budget of its scheduled send time
  std::uint64_t errors = 0;                                // transport errors, unexpected statuses, no answer in time
  std::map<std::string, std::uint64_t> rejected;           // 503 (and 400 invalid_timeout) by "error"
  std::map<std::string, std::uint64_t> deadline_exceeded;  // 504 by "stage"
  std::map<int, std::uint64_t> other_statuses;
  double goodput_rps = 0;
  double elapsed_s = 0;
  double max_send_lag_ms = 0;                                             // how late the generator itself ran
  histogram_snapshot latency{log_bucket_layout::three_digits_precision};  // ok responses, ns
  // 504s: from the request's deadline (its write began + the budget) to the
  // answer read, ns; 0 for one that came early. What hourglass-bench cancel
  // reports over HTTP: how late past its budget a caller learns it expired.
  histogram_snapshot expired_past_budget{log_bucket_layout::three_digits_precision};
};

// Quantiles of a latency histogram in JSON: {"p50", "p90", "p99", "p999",
// "max"} in units of `unit_ns` (1e6: milliseconds).
void add_latency_json(support::json_writer& j, const histogram_snapshot& h, double unit_ns);

// Runs the load and returns the report; `progress` gets one line a second.
// Throws std::invalid_argument for a bad URL or option.
http_report run_http(const http_options& options, const std::function<void(const std::string&)>& progress);

void print_table(std::ostream& out, const http_report& r);
std::string to_json(const http_report& r);

}  // namespace hourglass::bench
