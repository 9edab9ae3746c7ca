#include "hourglass/server/config.hpp"

#include <CLI/CLI.hpp>
#include <toml++/toml.h>

#include <algorithm>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "hourglass/budget_codec.hpp"

namespace hourglass::server {

namespace {

duration parse_duration(const std::string& key, const std::string& text) {
  const duration_parse p = parse_human_duration(text);
  if (!p.value) throw std::invalid_argument("--" + key + ": " + p.error);
  return *p.value;
}

// The value of --config in argv, if any (CLI11 parses it again later).
std::optional<std::string> find_config(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--config" && i + 1 < argc) return std::string(argv[i + 1]);
    if (a.substr(0, 9) == "--config=") return std::string(a.substr(9));
  }
  return std::nullopt;
}

std::string scalar_text(const std::string& key, const toml::node& n) {
  if (const auto* s = n.as_string()) return s->get();
  if (const auto* i = n.as_integer()) return std::to_string(i->get());
  if (const auto* b = n.as_boolean()) return b->get() ? "true" : "false";
  throw std::invalid_argument("config key '" + key + "' must be a string, an integer or a boolean");
}

// The file's keys as command-line arguments, to be parsed before the real
// command line (whose later occurrences win).
std::vector<std::string> config_arguments(const std::string& path, const CLI::App& app) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "config file " << path << ": " << e.description() << " (line " << e.source().begin.line << ")";
    throw std::invalid_argument(msg.str());
  }
  std::vector<std::string> args;
  for (const auto& [k, node] : table) {
    const std::string key(k.str());
    const CLI::Option* opt = key == "config" || key == "help" ? nullptr : app.get_option_no_throw("--" + key);
    if (opt == nullptr) throw std::invalid_argument("config file " + path + ": unknown key '" + key + "'");
    if (key == "upstream") {
      if (const auto* arr = node.as_array()) {
        for (const auto& item : *arr) {
          const auto* s = item.as_string();
          if (s == nullptr) throw std::invalid_argument("config key 'upstream': entries must be \"NAME=URL\" strings");
          args.push_back("--upstream=" + s->get());
        }
      } else if (const auto* tbl = node.as_table()) {
        for (const auto& [name, url] : *tbl) {
          const auto* s = url.as_string();
          if (s == nullptr) throw std::invalid_argument("config table 'upstream': values must be URL strings");
          args.push_back("--upstream=" + std::string(name.str()) + "=" + s->get());
        }
      } else {
        args.push_back("--upstream=" + scalar_text(key, node));
      }
      continue;
    }
    args.push_back("--" + key + "=" + scalar_text(key, node));
  }
  return args;
}

}  // namespace

command_line_result parse_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  server_options o;
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  o.workers = cpus;

  CLI::App app{"hourglassd: a deadline-aware job daemon. Jobs are POSTed to /v1/jobs/{handler} with their budget "
               "in Request-Timeout (gRPC syntax), grpc-timeout or X-Envoy-Expected-Rq-Timeout-Ms.\n"
               "Durations are written like 250ms, 2s, 1m.",
               "hourglassd"};
  app.option_defaults()->always_capture_default()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.get_formatter()->column_width(40);

  std::string config;
  std::string default_budget = format_human_duration(o.default_budget);
  std::string max_budget = format_human_duration(o.max_budget);
  std::string min_budget = format_human_duration(o.min_budget);
  std::string call_reserve = format_human_duration(o.call_reserve);
  std::string drain_timeout = format_human_duration(o.drain_timeout);
  std::string header_timeout = format_human_duration(o.header_timeout);
  std::string body_timeout = format_human_duration(o.body_timeout);
  std::string idle_timeout = format_human_duration(o.idle_timeout);
  std::string async_ttl = format_human_duration(o.async_ttl);
  std::string policy_name = "hourglass";
  std::vector<std::string> upstreams;

  app.add_option("--config", config, "TOML file with the same keys, without the dashes (the command line wins)")
      ->type_name("FILE")
      ->always_capture_default(false);
  app.add_option("--listen", o.listen, "ADDR:PORT to listen on ([v6]:PORT for IPv6; port 0 picks one)")
      ->type_name("ADDR:PORT");
  app.add_option("--workers", o.workers, "worker threads running jobs (default: one per CPU)")
      ->type_name("N")
      ->check(CLI::Range(1, 4096));
  app.add_option("--io-threads", o.io_threads, "threads serving sockets")
      ->type_name("N")->check(CLI::Range(1, 256));
  app.add_option("--queue-capacity", o.queue_capacity, "jobs that may wait; more are shed with 503 queue_full")
      ->type_name("N")
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--default-budget", default_budget, "budget of a request without a budget header")
      ->type_name("DUR");
  app.add_option("--max-budget", max_budget, "larger budgets are clamped to this; also async jobs' run limit")
      ->type_name("DUR");
  app.add_option("--min-budget", min_budget, "less left at admission: 504 deadline_exceeded/admission")
      ->type_name("DUR");
  app.add_option("--upstream", upstreams, "NAME=URL the call handler may reach (repeatable; http://host:port[/prefix])")
      ->type_name("NAME=URL")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->default_str("");
  app.add_option("--call-reserve", call_reserve, "kept back from the remaining budget on outgoing calls")
      ->type_name("DUR");
  app.add_option("--drain-timeout", drain_timeout, "on SIGTERM/SIGINT, how long running jobs may finish")
      ->type_name("DUR");
  app.add_option("--max-body", o.max_body, "largest request body in bytes (413 above)")
      ->type_name("BYTES");
  app.add_option("--policy", policy_name, "hourglass, or fifo: every deadline check off (for comparisons)")
      ->type_name("POLICY")
      ->check(CLI::IsMember({"hourglass", "fifo"}));
  app.add_option("--auth-token-file", o.auth_token_file,
                 "file holding the bearer token every request but /healthz must carry")
      ->type_name("FILE")
      ->always_capture_default(false);
  app.add_flag("--allow-unauthenticated", o.allow_unauthenticated,
               "allow a non-loopback --listen address without --auth-token-file");
  app.add_option("--header-timeout", header_timeout, "time to receive a request's headers (slow clients are cut off)")
      ->type_name("DUR");
  app.add_option("--body-timeout", body_timeout, "time to receive a request's body, and to write a response")
      ->type_name("DUR");
  app.add_option("--idle-timeout", idle_timeout, "keep-alive connections idle longer are closed")
      ->type_name("DUR");
  app.add_option("--max-connections", o.max_connections, "open connections; more are closed at once")
      ->type_name("N")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--async-ttl", async_ttl, "how long a finished async job's result is kept")
      ->type_name("DUR");
  app.add_option("--async-max-jobs", o.async_max_jobs, "async jobs remembered at once (finished or not)")
      ->type_name("N")
      ->check(CLI::Range(1, 100'000'000));
  app.add_option("--log-level", o.log_level, "trace, debug, info (one line per job), warn, error, critical, off")
      ->type_name("LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));

  try {
    std::vector<std::string> args;
    args.emplace_back(argc > 0 ? argv[0] : "hourglassd");
    if (const auto path = find_config(argc, argv)) {
      auto from_file = config_arguments(*path, app);
      args.insert(args.end(), from_file.begin(), from_file.end());
    }
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    std::vector<const char*> cargs;
    for (auto& a : args) cargs.push_back(a.c_str());
    app.parse(static_cast<int>(cargs.size()), cargs.data());

    o.default_budget = parse_duration("default-budget", default_budget);
    o.max_budget = parse_duration("max-budget", max_budget);
    o.min_budget = parse_duration("min-budget", min_budget);
    o.call_reserve = parse_duration("call-reserve", call_reserve);
    o.drain_timeout = parse_duration("drain-timeout", drain_timeout);
    o.header_timeout = parse_duration("header-timeout", header_timeout);
    o.body_timeout = parse_duration("body-timeout", body_timeout);
    o.idle_timeout = parse_duration("idle-timeout", idle_timeout);
    o.async_ttl = parse_duration("async-ttl", async_ttl);
    o.scheduling = policy_name == "fifo" ? policy::fifo : policy::hourglass;
    for (const auto& u : upstreams) {
      const auto eq = u.find('=');
      if (eq == std::string::npos || eq == 0) throw std::invalid_argument("--upstream must be NAME=URL, got '" + u + "'");
      o.upstreams[u.substr(0, eq)] = u.substr(eq + 1);  // a later one of the same name wins
    }
    validate(o);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return {std::nullopt, code == 0 ? 0 : 2};
  } catch (const std::invalid_argument& e) {
    err << "hourglassd: error: " << e.what() << "\n";
    return {std::nullopt, 2};
  }
  return {o, 0};
}

}  // namespace hourglass::server
