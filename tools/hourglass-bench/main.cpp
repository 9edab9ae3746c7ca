// hourglass-bench: the load-test and benchmark tool (docs/reference/cli.md, "hourglass-bench").
// A thin main: the experiments live in bench/ (overload/, http/, soak/, fleet/).
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "cancel/cancel_latency.hpp"
#include "hourglass/support/cli.hpp"
#include "http/http_load.hpp"
#ifdef HOURGLASS_BENCH_FLEET
#include "fleet/cluster_bench.hpp"
#include "fleet/fleet_bench.hpp"
#endif
#include "overload/overload.hpp"
#include "overload/repeat.hpp"
#include "overload/report.hpp"
#include "overload/throughput.hpp"
#ifdef HOURGLASS_BENCH_SOAK  // not in sanitizer builds (bench/CMakeLists.txt)
#include "soak/soak.hpp"
#endif

namespace {

// Each of --loads' items (CLI11 splits them at the commas).
const CLI::Validator positive_number(
    [](std::string& item) -> std::string {
      double v = 0;
      if (!CLI::detail::lexical_cast(item, v) || !(v > 0)) {
        return "'" + item + "' is not a positive number (e.g. 0.5,1,2,5,10)";
      }
      return {};
    },
    "", "positive");

void progress_to_stderr(const std::string& line) { std::cerr << line << std::endl; }
void no_progress(const std::string&) {}

// Runs a network experiment (fleet, http): a bad option is a usage error, a
// peer that cannot be used exits 1; otherwise its table, and its JSON line.
template <class Run>
int run_and_print(const char* name, bool json, Run run) {
  decltype(run()) report;
  try {
    report = run();
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(name, e.what());
  } catch (const std::exception& e) {
    std::cerr << "hourglass-bench " << name << ": " << e.what() << "\n";
    return 1;
  }
  hourglass::bench::print_table(std::cout, report);
  if (json) std::cout << hourglass::bench::to_json(report) << std::endl;
  return 0;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  using hourglass::cli::add_duration;
  CLI::App app{"hourglass-bench: load tests and benchmarks for hourglass"};
  app.require_subcommand(1);

  // ---- overload ----
  auto* ov = app.add_subcommand("overload",
                                "in-process overload experiment: capacity first, then each policy at each load");
  hourglass::bench::overload_options ovo;  // its defaults are the flags' defaults
  std::string csv_path, svg_path;
  bool ov_json = false, no_step = false, quiet = false;
  ov->add_option("--policies", ovo.policies, "comma list of hourglass, fifo, asio")
      ->delimiter(',')
      ->capture_default_str();
  ov->add_option("--loads", ovo.loads, "comma list of multiples of capacity")
      ->delimiter(',')
      ->check(positive_number)
      ->capture_default_str();
  add_duration(*ov, "--service-time", ovo.service_time, "CPU time of one job");
  add_duration(*ov, "--budget", ovo.budget, "deadline after each arrival (default 10 x service time)")->default_str("");
  add_duration(*ov, "--min-budget", ovo.min_budget, "minimum useful budget (default: the service time)")
      ->default_str("");
  add_duration(*ov, "--duration", ovo.run_length, "length of each (policy, load) run");
  add_duration(*ov, "--capacity-duration", ovo.capacity_length, "length of the capacity measurement");
  add_duration(*ov, "--step-phase", ovo.step_phase, "length of each phase of the step run");
  add_duration(*ov, "--send-quantum", ovo.send_quantum,
               "the generator wakes at most this often (default: per arrival when it has a core of its own, else "
               "budget / 20)")
      ->default_str("");
  ov->add_flag("--no-step", no_step, "skip the step run (0.5x -> 5x -> 0.5x)");
  ov->add_option("--workers", ovo.workers, "worker threads (default: cores - 1, the generator keeps a core)");
  ov->add_option("--queue-capacity", ovo.queue_capacity, "admission queue capacity (hourglass, fifo)")
      ->capture_default_str();
  ov->add_option("--seed", ovo.seed, "seed of the Poisson arrivals")->capture_default_str();
  ov->add_option("--noise", ovo.noise,
                 "a CPU hog takes this share (0..1) of each worker core, capacity measurement included; workers "
                 "and the generator are pinned to their own cores")
      ->capture_default_str();
  add_duration(*ov, "--noise-period", ovo.noise_period, "the hog's period: it spins noise x period of each");
  ov->add_flag("--json", ov_json, "print one JSON object as the last line of standard output");
  ov->add_option("--csv", csv_path, "write one row per (policy, load) to FILE");
  ov->add_option("--svg", svg_path, "write a chart to FILE");
  ov->add_flag("-q,--quiet", quiet, "no progress lines on standard error");
  int repeat = 1;
  ov->add_option("--repeat", repeat,
                 "run the whole experiment N times (seeds seed .. seed+N-1) and report the median, min and max of "
                 "each (policy, load); --csv and --svg are of the last run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  // ---- throughput ----
  auto* tp = app.add_subcommand("throughput",
                                "empty-job throughput against raw moodycamel, asio, a mutex pool and oneTBB");
  hourglass::bench::throughput_options tpo;  // its defaults are the flags' defaults
  bool tp_json = false;
  tp->add_option("--workers", tpo.workers, "worker threads (default: cores - 1, the submitter keeps a core)");
  tp->add_option("--jobs", tpo.jobs, "jobs per pool and round")->capture_default_str();
  tp->add_option("--rounds", tpo.rounds, "interleaved rounds; the best of each pool counts")->capture_default_str();
  tp->add_option(
        "--pools", tpo.pools,
        "comma list of the pools to run: hourglass, moodycamel, asio, mutex, tbb (default: all; for profiling)")
      ->delimiter(',');
  tp->add_flag("--json", tp_json, "print one JSON object as the last line of standard output");

  // ---- cancel ----
  auto* cn = app.add_subcommand("cancel",
                                "how late past its deadline a job learns it expired: in process (ctx.sleep_for, an "
                                "Asio timer), and with --url over HTTP (the 504 of the daemon's sleep handler)");
  hourglass::bench::cancel_options cno;  // its defaults are the flags' defaults
  bool cn_json = false;
  cn->add_option("--jobs", cno.jobs, "jobs per kind of wait")->capture_default_str();
  cn->add_option("--concurrency", cno.concurrency, "jobs waiting at once (the executor's workers)")
      ->capture_default_str();
  add_duration(*cn, "--budget", cno.budget, "each job's deadline: submission + budget + up to one more budget");
  cn->add_option("--url", cno.url,
                 "a running hourglassd, e.g. http://127.0.0.1:8080 (give it --workers >= "
                 "--connections): also time its 504s");
  cn->add_option("--requests", cno.requests, "over HTTP: requests to the sleep handler")->capture_default_str();
  cn->add_option("--connections", cno.connections, "over HTTP: requests in flight at once")->capture_default_str();
  add_duration(*cn, "--http-budget", cno.http_budget, "over HTTP: each request's budget (Request-Timeout)");
  add_duration(*cn, "--spin-floor", cno.spin_margin,
               "also measure plain waits woken this early that spin to their deadline (0: not measured)");
  cn->add_flag("--json", cn_json, "print one JSON object as the last line of standard output");

  // ---- http ----
  auto* hp = app.add_subcommand("http", "open-loop HTTP load against hourglassd; latency from the scheduled send time");
  hourglass::bench::http_options hpo;  // its defaults are the flags' defaults
  bool hp_json = false;
  hp->add_option("url", hpo.url, "e.g. http://127.0.0.1:8080/v1/jobs/echo")->required();
  hp->add_option("--rate", hpo.rate, "requests per second, on a fixed schedule")->capture_default_str();
  add_duration(*hp, "--duration", hpo.length, "how long to send");
  add_duration(*hp, "--budget", hpo.budget, "each request's budget, sent as Request-Timeout");
  hp->add_option("--body", hpo.body, "request body");
  hp->add_option("--connections", hpo.connections, "keep-alive connections")->capture_default_str();
  hp->add_flag("--json", hp_json, "print one JSON object as the last line of standard output");

#ifdef HOURGLASS_BENCH_SOAK
  // ---- soak ----
  auto* sk = app.add_subcommand(
      "soak",
      "a running hourglassd at a multiple of its capacity for minutes: fails if its RSS, fds, "
      "threads or async store grow, or if any request goes unanswered");
  hourglass::bench::soak_options sko;  // its defaults are the flags' defaults
  std::string sk_csv, sk_svg;
  bool sk_json = false;
  sk->add_option("--url", sko.url, "the daemon, e.g. http://127.0.0.1:8080")->required();
  sk->add_option("--pid", sko.pid, "the daemon's process id (its /proc/PID is sampled)")->required();
  add_duration(*sk, "--duration", sko.length, "how long the load runs");
  sk->add_option("--capacity", sko.capacity, "the daemon's capacity in jobs/s (default: measured first, closed loop)");
  add_duration(*sk, "--capacity-probe", sko.capacity_probe, "length of the capacity measurement");
  sk->add_option("--load", sko.load, "offered jobs per second, as a multiple of capacity")->capture_default_str();
  sk->add_option("--async-share", sko.async_share, "share of the offered jobs sent async (Prefer: respond-async)")
      ->capture_default_str();
  sk->add_option("--spin-us", sko.spin_us, "CPU time of each job (the spin handler's {\"us\": N})")
      ->capture_default_str();
  add_duration(*sk, "--budget", sko.budget, "sync jobs' budget, sent as Request-Timeout");
  add_duration(*sk, "--freshness", sko.freshness, "async jobs' Job-Freshness");
  add_duration(*sk, "--poll-interval", sko.poll_interval, "between GETs of an accepted async job");
  sk->add_option("--slow-rate", sko.slow_rate,
                 "misbehaving connections opened per second, in turn: headers trickled, body trickled, "
                 "responses never read, sync job abandoned")
      ->capture_default_str();
  add_duration(*sk, "--slow-hold", sko.slow_hold,
               "the daemon must close a slow client within this (above its --header-timeout and --body-timeout)");
  add_duration(*sk, "--async-ttl", sko.async_ttl,
               "the daemon's --async-ttl: finished jobs are checked to be forgotten after it, and a 404 for a "
               "job seen unfinished less than it ago is a lost job (0s: neither is judged)");
  sk->add_option("--sync-connections", sko.sync_connections,
                 "keep-alive connections of the sync load (default: 1.25 x sync rate x budget + 32)");
  sk->add_option("--async-connections", sko.async_connections, "keep-alive connections for async jobs and polls")
      ->capture_default_str();
  sk->add_option("--store-metric", sko.store_metric, "the daemon's gauge of stored async jobs, sampled if exported")
      ->capture_default_str();
  sk->add_option("--max-growth", sko.max_growth, "allowed growth of a resource's late mean over its early mean")
      ->capture_default_str();
  sk->add_option("--csv", sk_csv, "write one row per second to FILE");
  sk->add_option("--svg", sk_svg, "write a chart of RSS and open fds over time to FILE");
  sk->add_flag("--json", sk_json, "print one JSON object as the last line of standard output");
  sk->add_flag("-v,--verbose", sko.verbose, "also the sync load's own progress lines");
  sk->footer(
      "Verdict: the run fails (exit 1) if the daemon exits, if any request of the soak got no answer at all (any "
      "HTTP status is an answer; the misbehaving connections are not requests and must instead be closed by the "
      "daemon within --slow-hold), if an accepted async job is lost, never finishes or outlives --async-ttl, if jobs "
      "are still in flight once all is quiet, or if a resource grows: the mean of its samples (one a second) in the "
      "late window above the mean in the early window by more than --max-growth and by more than a small absolute "
      "slack (RSS 2048 KiB, fds 5, threads 1, async store 50 jobs).\n"
      "Windows: for --duration of 3 minutes or more, early = the second minute (60, 120] s and late = the last "
      "minute; below 3 minutes, early = the second third and late = the last third. The first minute (or third) "
      "is warm-up and is not compared.\n"
      "fds are judged less the soak's own established connections to the daemon (read in /proc/self), so a daemon "
      "that keeps closed connections open shows, and more load does not.");
#endif

#ifdef HOURGLASS_BENCH_FLEET
  // ---- fleet ----
  auto* fl = app.add_subcommand("fleet",
                                "jobs through a Redis broker: throughput beside Redis's own rate, and "
                                "goodput within freshness under overload against a naive consumer");
  hourglass::bench::fleet_options flo;  // its defaults are the flags' defaults
  bool fl_json = false;
  fl->add_option("--broker", flo.broker, "redis://HOST:PORT[/DB] (its keys are bench-* and removed after)")
      ->capture_default_str();
  fl->add_option("--consumers", flo.consumers, "comma list of consumer counts for the throughput runs")
      ->delimiter(',')
      ->capture_default_str();
  fl->add_option("--slots", flo.slots, "worker slots per consumer")->capture_default_str();
  fl->add_option("--prefetch", flo.prefetch, "entries each consumer holds beyond its slots (hourglassd --prefetch)")
      ->capture_default_str();
  fl->add_option("--jobs", flo.jobs, "jobs per throughput run")->capture_default_str();
  fl->add_option("--producers", flo.producers, "threads enqueueing")->capture_default_str();
  fl->add_option("--window", flo.window, "each producer's enqueues in flight (a pipelined client)")
      ->capture_default_str();
  fl->add_option("--bulk", flo.bulk, "jobs per bulk enqueue call")->capture_default_str();
  fl->add_option(
        "--latency-rate", flo.latency_rate,
        "jobs/s offered in the start-latency runs (0: half the end-to-end rate), to compare builds at one rate")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  fl->add_flag("--fsync-always", flo.fsync_always,
               "throughput runs with appendonly yes + appendfsync always (a 202 on disk); settings restored after");
  fl->add_option("--overload-consumers", flo.overload_consumers, "consumers in the overload runs")
      ->capture_default_str();
  fl->add_option("--loads", flo.loads, "comma list of multiples of capacity for the overload runs")
      ->delimiter(',')
      ->check(positive_number)
      ->capture_default_str();
  fl->add_option("--rate", flo.rate, "offered jobs/s for one overload run instead of --loads");
  add_duration(*fl, "--duration", flo.length, "length of each overload run");
  add_duration(*fl, "--freshness", flo.freshness, "each overload job's freshness bound");
  add_duration(*fl, "--service-time", flo.service_time, "each overload job's run time (spent waiting, as I/O)");
  fl->add_flag("--json", fl_json, "print one JSON object as the last line of standard output");

  // ---- cluster ----
  auto* cl = app.add_subcommand("cluster",
                                "the fleet on a Redis Cluster: queues spread over its masters, jobs/s of the whole "
                                "and each master's commands/s and CPU");
  hourglass::bench::cluster_options clo;
  bool cl_json = false;
  cl->add_option("--broker", clo.broker, "redis+cluster://HOST:PORT[,HOST:PORT...] (keys bench-*, removed after)")
      ->required();
  cl->add_option("--queues", clo.queues,
                 "comma list of queue counts, one run each (each queue on its own master "
                 "while there is one)")
      ->delimiter(',')
      ->capture_default_str();
  cl->add_option("--shards", clo.shards,
                 "comma list of shard counts: one queue over each, one run each, instead of --queues (the work of as "
                 "many queues: each consumer serves every shard with --slots per shard, --producers and --jobs per "
                 "shard)")
      ->delimiter(',');
  cl->add_option("--consumers", clo.consumers, "consumers per queue")->capture_default_str();
  cl->add_option("--slots", clo.slots, "worker slots per consumer")->capture_default_str();
  cl->add_option("--jobs", clo.jobs, "jobs per queue and run")->capture_default_str();
  cl->add_option("--producers", clo.producers, "threads enqueueing, per queue")->capture_default_str();
  cl->add_option("--window", clo.window, "each producer's enqueues in flight")->capture_default_str();
  cl->add_flag("--json", cl_json, "print one JSON object as the last line of standard output");
#endif

  try {
    app.parse(argc, argv);
#ifdef HOURGLASS_BENCH_FLEET
    if (*fl)
      return run_and_print("fleet", fl_json, [&] { return hourglass::bench::run_fleet(flo, progress_to_stderr); });
    if (*cl) {
      return run_and_print("cluster", cl_json, [&] { return hourglass::bench::run_cluster(clo, progress_to_stderr); });
    }
#endif
#ifdef HOURGLASS_BENCH_SOAK
    if (*sk) {
      hourglass::bench::soak_report report;
      try {
        report = hourglass::bench::run_soak(sko, progress_to_stderr);
      } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError("soak", e.what());
      } catch (const std::exception& e) {
        std::cerr << "hourglass-bench soak: " << e.what() << "\n";
        return 1;
      }
      hourglass::bench::print_table(std::cout, report);
      int rc = report.passed() ? 0 : 1;
      if (!sk_csv.empty()) {
        std::ostringstream csv;
        hourglass::bench::write_csv(csv, report);
        if (!write_file(sk_csv, csv.str())) std::cerr << "cannot write " << sk_csv << "\n", rc = 1;
      }
      if (!sk_svg.empty()) {
        if (write_file(sk_svg, hourglass::bench::to_svg(report))) {
          std::cout << "chart: " << sk_svg << "\n";
        } else {
          std::cerr << "cannot write " << sk_svg << "\n", rc = 1;
        }
      }
      if (sk_json) std::cout << hourglass::bench::to_json(report) << std::endl;
      return rc;
    }
#endif
    if (*cn) {
      return run_and_print("cancel", cn_json, [&] { return hourglass::bench::run_cancel(cno, progress_to_stderr); });
    }
    if (*hp) return run_and_print("http", hp_json, [&] { return hourglass::bench::run_http(hpo, progress_to_stderr); });
    if (*ov) {
      hourglass::bench::overload_options o = ovo;
      o.step = !no_step;
      try {
        o = hourglass::bench::resolve(o);
      } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError("overload", e.what());
      }
      std::vector<hourglass::bench::overload_report> reports;
      for (int i = 0; i < repeat; ++i) {
        if (repeat > 1) std::cout << "== run " << i + 1 << " of " << repeat << " (seed " << o.seed << ")\n";
        reports.push_back(hourglass::bench::run_overload(o, quiet ? no_progress : progress_to_stderr));
        hourglass::bench::print_table(std::cout, reports.back());
        ++o.seed;
      }
      const auto& report = reports.back();
      int rc = 0;
      if (!csv_path.empty()) {
        std::ostringstream csv;
        hourglass::bench::write_csv(csv, report);
        if (!write_file(csv_path, csv.str())) std::cerr << "cannot write " << csv_path << "\n", rc = 1;
      }
      if (!svg_path.empty()) {
        if (write_file(svg_path, hourglass::bench::to_svg(report))) {
          std::cout << "chart: " << svg_path << "\n";
        } else {
          std::cerr << "cannot write " << svg_path << "\n", rc = 1;
        }
      }
      if (repeat > 1) {
        const auto summary = hourglass::bench::summarize(std::move(reports));
        std::cout << "== summary\n";
        hourglass::bench::print_table(std::cout, summary);
        if (ov_json) std::cout << hourglass::bench::to_json(summary) << std::endl;
      } else if (ov_json) {
        std::cout << hourglass::bench::to_json(report) << std::endl;
      }
      return rc;
    }
    if (*tp) {
      const auto report = hourglass::bench::run_throughput(tpo, progress_to_stderr);
      hourglass::bench::print_table(std::cout, report);
      if (tp_json) std::cout << hourglass::bench::to_json(report) << std::endl;
      return 0;
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
