// hourglass-bench: the load-test and benchmark tool (protocol.md, "hourglass-bench").
// A thin main: the experiments live in bench/overload/.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "hourglass/budget_codec.hpp"
#include "http/http_load.hpp"
#include "overload/overload.hpp"
#include "overload/report.hpp"
#include "overload/throughput.hpp"

namespace {

using hourglass::duration;

// CLI11 validator-and-converter for durations written like 250ms, 2s, 100us.
duration parse_duration(const std::string& text, const char* what) {
  auto p = hourglass::parse_human_duration(text);
  if (!p.value) throw CLI::ValidationError(what, p.error);
  return *p.value;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<double> parse_loads(const std::string& s) {
  std::vector<double> out;
  for (const auto& item : split(s)) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || !(v > 0)) {
      throw CLI::ValidationError("--loads", "'" + item + "' is not a positive number (e.g. 0.5,1,2,5,10)");
    }
    out.push_back(v);
  }
  if (out.empty()) throw CLI::ValidationError("--loads", "no loads given");
  return out;
}

void progress_to_stderr(const std::string& line) { std::cerr << line << std::endl; }
void no_progress(const std::string&) {}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hourglass-bench: load tests and benchmarks for hourglass"};
  app.require_subcommand(1);

  // ---- overload ----
  auto* ov = app.add_subcommand("overload",
                                "in-process overload experiment: capacity first, then each policy at each load");
  std::string policies = "hourglass,fifo,asio", loads = "0.5,1,2,5,10";
  std::string service = "1ms", budget, min_budget, run_length = "2s", capacity_length = "1s", step_phase = "1s";
  std::string csv_path, svg_path;
  bool ov_json = false, no_step = false, quiet = false;
  std::size_t ov_workers = 0, queue_capacity = 1024;
  std::uint64_t seed = 42;
  ov->add_option("--policies", policies, "comma list of hourglass, fifo, asio")->capture_default_str();
  ov->add_option("--loads", loads, "comma list of multiples of capacity")->capture_default_str();
  ov->add_option("--service-time", service, "CPU time of one job")->capture_default_str();
  ov->add_option("--budget", budget, "deadline after each arrival (default 10 x service time)");
  ov->add_option("--min-budget", min_budget, "minimum useful budget (default: the service time)");
  ov->add_option("--duration", run_length, "length of each (policy, load) run")->capture_default_str();
  ov->add_option("--capacity-duration", capacity_length, "length of the capacity measurement")->capture_default_str();
  ov->add_option("--step-phase", step_phase, "length of each phase of the step run")->capture_default_str();
  std::string quantum;
  ov->add_option("--send-quantum", quantum, "the generator wakes at most this often (default: per arrival when it has a core of its own, else budget / 20)");
  ov->add_flag("--no-step", no_step, "skip the step run (0.5x -> 5x -> 0.5x)");
  ov->add_option("--workers", ov_workers, "worker threads (default: cores - 1, the generator keeps a core)");
  ov->add_option("--queue-capacity", queue_capacity, "admission queue capacity (hourglass, fifo)")->capture_default_str();
  ov->add_option("--seed", seed, "seed of the Poisson arrivals")->capture_default_str();
  ov->add_flag("--json", ov_json, "print one JSON object as the last line of standard output");
  ov->add_option("--csv", csv_path, "write one row per (policy, load) to FILE");
  ov->add_option("--svg", svg_path, "write a chart to FILE");
  ov->add_flag("-q,--quiet", quiet, "no progress lines on standard error");

  // ---- throughput ----
  auto* tp = app.add_subcommand("throughput", "empty-job throughput against raw moodycamel, asio and a mutex pool");
  std::size_t tp_workers = 0, jobs = 1'000'000;
  int rounds = 3;
  bool tp_json = false;
  std::string pools;
  tp->add_option("--workers", tp_workers, "worker threads (default: cores - 1, the submitter keeps a core)");
  tp->add_option("--jobs", jobs, "jobs per pool and round")->capture_default_str();
  tp->add_option("--rounds", rounds, "interleaved rounds; the best of each pool counts")->capture_default_str();
  tp->add_option("--pools", pools, "comma list of the pools to run (default: all four; for profiling)");
  tp->add_flag("--json", tp_json, "print one JSON object as the last line of standard output");

  // ---- http ----
  auto* hp = app.add_subcommand("http", "open-loop HTTP load against hourglassd; latency from the scheduled send time");
  std::string url, hp_length = "10s", hp_budget = "1s", hp_body;
  double rate = 100;
  std::size_t connections = 16;
  bool hp_json = false;
  hp->add_option("url", url, "e.g. http://127.0.0.1:8080/v1/jobs/echo")->required();
  hp->add_option("--rate", rate, "requests per second, on a fixed schedule")->capture_default_str();
  hp->add_option("--duration", hp_length, "how long to send")->capture_default_str();
  hp->add_option("--budget", hp_budget, "each request's budget, sent as Request-Timeout")->capture_default_str();
  hp->add_option("--body", hp_body, "request body");
  hp->add_option("--connections", connections, "keep-alive connections")->capture_default_str();
  hp->add_flag("--json", hp_json, "print one JSON object as the last line of standard output");

  try {
    app.parse(argc, argv);
    if (*hp) {
      hourglass::bench::http_options o;
      o.url = url;
      o.rate = rate;
      o.length = parse_duration(hp_length, "--duration");
      o.budget = parse_duration(hp_budget, "--budget");
      o.body = hp_body;
      o.connections = connections;
      hourglass::bench::http_report report;
      try {
        report = hourglass::bench::run_http(o, progress_to_stderr);
      } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError("http", e.what());
      } catch (const std::exception& e) {
        std::cerr << "hourglass-bench http: " << e.what() << "\n";
        return 1;
      }
      hourglass::bench::print_table(std::cout, report);
      if (hp_json) std::cout << hourglass::bench::to_json(report) << std::endl;
      return 0;
    }
    if (*ov) {
      hourglass::bench::overload_options o;
      o.policies = split(policies);
      o.loads = parse_loads(loads);
      o.service_time = parse_duration(service, "--service-time");
      if (!budget.empty()) o.budget = parse_duration(budget, "--budget");
      if (!min_budget.empty()) o.min_budget = parse_duration(min_budget, "--min-budget");
      o.run_length = parse_duration(run_length, "--duration");
      o.capacity_length = parse_duration(capacity_length, "--capacity-duration");
      o.step_phase = parse_duration(step_phase, "--step-phase");
      if (!quantum.empty()) o.send_quantum = parse_duration(quantum, "--send-quantum");
      o.step = !no_step;
      o.workers = ov_workers;
      o.queue_capacity = queue_capacity;
      o.seed = seed;
      try {
        o = hourglass::bench::resolve(o);
      } catch (const std::invalid_argument& e) {
        throw CLI::ValidationError("overload", e.what());
      }
      const auto report = hourglass::bench::run_overload(o, quiet ? no_progress : progress_to_stderr);
      hourglass::bench::print_table(std::cout, report);
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
      if (ov_json) std::cout << hourglass::bench::to_json(report) << std::endl;
      return rc;
    }
    if (*tp) {
      hourglass::bench::throughput_options o{tp_workers, jobs, rounds, split(pools)};
      const auto report = hourglass::bench::run_throughput(o, progress_to_stderr);
      hourglass::bench::print_table(std::cout, report);
      if (tp_json) std::cout << hourglass::bench::to_json(report) << std::endl;
      return 0;
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
