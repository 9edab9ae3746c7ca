// hourglass-bench soak: a running hourglassd at a multiple of its capacity
// for minutes, its resources sampled once a second, and a verdict: does
// anything grow without bound, and was every request answered?
//
// The load, all open-loop (arrivals on a fixed schedule):
//  - sync POST /v1/jobs/spin with a budget (bench/http's run_http, as is);
//  - async POST /v1/jobs/spin (Prefer: respond-async), each accepted job
//    polled with GET until it ends, and later checked to be forgotten after
//    the daemon's --async-ttl;
//  - misbehaving clients: headers trickled, a body trickled, pipelined
//    requests never read, a sync job abandoned mid-wait. The daemon must
//    close the first three itself (slow-client protection).
// Sampled each second: the daemon's RSS, open fds and threads (/proc/PID),
// and from GET /metrics its queue depth, busy workers, jobs in flight and,
// when it exports one, the async store's size.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "hourglass/time.hpp"
#include "http/http_load.hpp"

namespace hourglass::bench {

struct soak_options {
  std::string url;  // the daemon, http://HOST:PORT
  int pid = 0;      // the daemon's process, read in /proc
  duration length = std::chrono::seconds(60);
  double capacity = 0;  // jobs/s; 0: measured first
  duration capacity_probe = std::chrono::seconds(3);
  double load = 5;                                   // offered jobs = load x capacity
  double async_share = 0.1;                          // of the offered jobs (0.5x capacity at load 5)
  std::int64_t spin_us = 10000;                      // CPU per job
  duration budget = std::chrono::milliseconds(250);  // sync jobs' Request-Timeout
  duration freshness = std::chrono::seconds(1);      // async jobs' Job-Freshness
  duration poll_interval = std::chrono::milliseconds(500);
  double slow_rate = 4;                           // misbehaving connections opened per second
  duration slow_hold = std::chrono::seconds(15);  // closed by the daemon within this, or "held"
  duration async_ttl = duration::zero();          // the daemon\'s --async-ttl; 0: lost or kept jobs not judged
  std::size_t sync_connections = 0;               // 0: enough for the rate and budget
  std::size_t async_connections = 64;
  std::string store_metric = "hourglass_async_jobs_stored";  // a gauge, if the daemon has one
  double max_growth = 0.10;                                  // late mean over early mean, above 1
  bool verbose = false;                                      // run_http's own progress lines too
};

constexpr double not_measured = std::numeric_limits<double>::quiet_NaN();

// One second of the run (t_s seconds after the load started).
struct soak_sample {
  double t_s = 0;
  double rss_kib = not_measured;
  double fds = not_measured;
  double threads = not_measured;
  double own_connections = not_measured;  // the soak's established sockets to the daemon
  double async_store = not_measured;      // --store-metric, when exported
  double queue_depth = not_measured;
  double workers_busy = not_measured;
  double in_flight = not_measured;  // admitted - finished, every handler
  double admitted_total = not_measured;
  double rejected_total = not_measured;
  double finished_total = not_measured;
  std::uint64_t async_offered = 0;  // async requests so far (POSTs and GETs)
  std::uint64_t async_answered = 0;
  std::uint64_t async_backlog = 0;  // our async requests not yet answered (waiting or on the wire)
  std::uint64_t slow_open = 0;
  double load_average = not_measured;  // the machine's, over 1 minute (/proc/loadavg): is it ours alone?
  double late_ms = 0;                  // how late this sample was taken: the soak's own scheduling delay
};

// The comparison of one resource: mean of the late window against the early one.
struct resource_trend {
  std::string name;  // rss_kib, fds_net, threads, async_store
  std::string what;  // for people
  bool measured = false;
  double early_mean = not_measured;
  double late_mean = not_measured;
  double slack = 0;     // growth below this absolute amount is noise, whatever the ratio
  bool judged = false;  // part of the verdict, or shown only
  bool grew = false;
};

struct soak_window {
  double from_s = 0;  // (from, to]
  double to_s = 0;
};

struct soak_report {
  soak_options options;
  double capacity_rps = 0;
  bool capacity_measured = false;
  double offered_rps = 0;  // sync + async jobs
  double elapsed_s = 0;
  std::vector<soak_sample> samples;

  http_report sync;  // run_http's report
  struct {
    std::uint64_t requests = 0;  // POSTs, polls and TTL checks sent
    std::uint64_t answered = 0;
    std::uint64_t submitted = 0;       // POSTs
    std::uint64_t accepted = 0;        // 202
    std::uint64_t refused = 0;         // 503 / 504
    std::uint64_t finished = 0;        // accepted jobs seen in a final state
    std::uint64_t lost = 0;            // 404 while the daemon had to keep it (unfinished within the TTL)
    std::uint64_t expired_unseen = 0;  // 404 after the TTL: our polls fell behind, not judged
    std::uint64_t unresolved = 0;      // accepted, no final state seen by the end of the drain
    std::uint64_t ttl_checked = 0;
    std::uint64_t kept_past_ttl = 0;  // still 200 after finished + --async-ttl
    std::map<std::string, std::uint64_t> final_states;
    std::map<int, std::uint64_t> other_statuses;
  } async;
  struct {
    std::uint64_t opened = 0;
    std::uint64_t connect_failed = 0;
    std::uint64_t closed_by_server = 0;  // of the kinds the daemon must cut off
    std::uint64_t held = 0;              // still open after --slow-hold
    std::uint64_t abandoned = 0;         // sync jobs left mid-wait (the daemon should cancel them)
    std::uint64_t cut_short = 0;         // still open when the run ended, not judged
    double max_close_s = 0;              // slowest close by the daemon
    std::map<std::string, std::uint64_t> held_by_kind;
  } slow;
  std::uint64_t metrics_requests = 0;
  std::uint64_t metrics_answered = 0;
  bool store_metric_found = false;
  double in_flight_after = not_measured;  // at a quiet moment after the drain
  bool daemon_exited = false;
  std::vector<std::string> unanswered_examples;  // the first few reasons

  soak_window early, late;
  std::vector<resource_trend> trends;
  std::vector<std::string> failures;  // empty: the soak passed
  bool passed() const { return failures.empty(); }
};

// The early and late windows for a run of `length_s` seconds: minute 2 and
// the last minute from 3 minutes on; below that the second and last thirds.
soak_window early_window(double length_s);
soak_window late_window(double length_s);

// Runs the soak. Throws std::invalid_argument for a bad option and
// std::runtime_error when the daemon cannot be driven at all.
soak_report run_soak(const soak_options& options, const std::function<void(const std::string&)>& progress);

// Fills trends and failures from the samples and counts.
void judge(soak_report& r);

void print_table(std::ostream& out, const soak_report& r);
std::string to_json(const soak_report& r);
void write_csv(std::ostream& out, const soak_report& r);
// RSS and open fds over time, the two windows and their means marked.
std::string to_svg(const soak_report& r);

}  // namespace hourglass::bench
