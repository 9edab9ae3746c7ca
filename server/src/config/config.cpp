#include "hourglass/server/config.hpp"

#include <CLI/CLI.hpp>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "hourglass/budget_codec.hpp"
#include "hourglass/support/cli.hpp"
#include "schedules/schedule_config.hpp"

namespace hourglass::server {

namespace {

const std::map<std::string, policy> policy_names{{"hourglass", policy::hourglass}, {"fifo", policy::fifo}};

// "NAME=URL" -> upstreams[NAME] = URL; a later one of the same name wins.
void add_upstream(std::map<std::string, std::string>& upstreams, const std::string& entry) {
  const auto eq = entry.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw std::invalid_argument("--upstream must be NAME=URL, got '" + entry + "'");
  }
  upstreams[entry.substr(0, eq)] = entry.substr(eq + 1);
}

// Every option once: a CLI11 option bound to its server_options field, and a
// reader that sets the same field from the TOML value of the same key (the
// flag without its dashes). Readers throw std::invalid_argument naming the key.
class option_table {
 public:
  using reader = std::function<void(const toml::node&)>;

  explicit option_table(CLI::App& app) : app_(app) {}

  CLI::Option* text(const std::string& key, std::string& field, const std::string& help,
                    const std::vector<std::string>& allowed = {}) {
    readers_[key] = [key, &field, allowed](const toml::node& n) {
      const auto* s = n.as_string();
      if (s == nullptr) throw type_error(key, "a string", n);
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), s->get()) == allowed.end()) {
        throw std::invalid_argument("key '" + key + "': '" + s->get() + "' is not one of " + join(allowed));
      }
      field = s->get();
    };
    auto* opt = app_.add_option("--" + key, field, help);
    if (!allowed.empty()) opt->check(CLI::IsMember(allowed));
    return opt;
  }

  // Repeatable strings on the command line; in the file a string or an
  // array of them. The command line's replace the file's.
  CLI::Option* texts(const std::string& key, std::vector<std::string>& field, const std::string& help) {
    readers_[key] = [key, &field](const toml::node& n) {
      field.clear();
      if (const auto* s = n.as_string()) return field.push_back(s->get());
      const auto* arr = n.as_array();
      if (arr == nullptr) throw type_error(key, "a string or an array of strings", n);
      for (const auto& item : *arr) {
        const auto* s = item.as_string();
        if (s == nullptr) throw type_error(key, "a string or an array of strings", item);
        field.push_back(s->get());
      }
    };
    return app_.add_option("--" + key, field, help)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }

  // A count; `lo`..`hi` bound both the flag and the file's value.
  CLI::Option* count(const std::string& key, std::size_t& field, const std::string& help, std::size_t lo = 0,
                     std::size_t hi = SIZE_MAX) {
    readers_[key] = [key, &field, lo, hi](const toml::node& n) {
      const auto* i = n.as_integer();
      if (i == nullptr) throw type_error(key, "an integer", n);
      const std::int64_t v = i->get();
      if (v < 0 || static_cast<std::uint64_t>(v) < lo || static_cast<std::uint64_t>(v) > hi) {
        throw std::invalid_argument("key '" + key + "': " + std::to_string(v) + " is not in [" + std::to_string(lo) +
                                    " - " + std::to_string(hi) + "]");
      }
      field = static_cast<std::size_t>(v);
    };
    auto* opt = app_.add_option("--" + key, field, help)->type_name("N");
    if (lo != 0 || hi != SIZE_MAX) opt->check(CLI::Range(lo, hi));
    return opt;
  }

  CLI::Option* time(const std::string& key, duration& field, const std::string& help) {
    readers_[key] = [key, &field](const toml::node& n) {
      const auto* s = n.as_string();
      if (s == nullptr) throw type_error(key, "a duration string like \"250ms\"", n);
      const duration_parse p = parse_human_duration(s->get());
      if (!p.value) throw std::invalid_argument("key '" + key + "': " + p.error);
      field = *p.value;
    };
    return cli::add_duration(app_, "--" + key, field, help);
  }

  CLI::Option* flag(const std::string& key, bool& field, const std::string& help) {
    readers_[key] = [key, &field](const toml::node& n) {
      const auto* b = n.as_boolean();
      if (b == nullptr) throw type_error(key, "true or false", n);
      field = b->get();
    };
    return app_.add_flag("--" + key, field, help);
  }

  CLI::Option* scheduling(const std::string& key, policy& field, const std::string& help) {
    readers_[key] = [key, &field](const toml::node& n) {
      const auto* s = n.as_string();
      if (s == nullptr) throw type_error(key, "a string", n);
      const auto it = policy_names.find(s->get());
      if (it == policy_names.end()) {
        throw std::invalid_argument("key '" + key + "': '" + s->get() + "' is not one of {hourglass,fifo}");
      }
      field = it->second;
    };
    std::string current;
    for (const auto& [name, value] : policy_names) {
      if (value == field) current = name;
    }
    // Only the names are accepted (CLI::CheckedTransformer would also take
    // the enum's numbers), with the same message as the file's.
    const CLI::Validator by_name(
        [](std::string& text) -> std::string {
          const auto it = policy_names.find(text);
          if (it == policy_names.end()) return "'" + text + "' is not one of {hourglass,fifo}";
          text = std::to_string(static_cast<int>(it->second));
          return {};
        },
        "{hourglass,fifo}", "policy");
    return app_.add_option("--" + key, field, help)->transform(by_name)->default_str(current);
  }

  // Repeatable NAME=URL on the command line; in the file an array of
  // "NAME=URL" strings or a table NAME = URL.
  CLI::Option* upstreams(const std::string& key, std::vector<std::string>& from_command_line,
                         std::map<std::string, std::string>& field, const std::string& help) {
    readers_[key] = [key, &field](const toml::node& n) {
      if (const auto* arr = n.as_array()) {
        for (const auto& item : *arr) {
          const auto* s = item.as_string();
          if (s == nullptr) throw std::invalid_argument("key '" + key + "': entries must be \"NAME=URL\" strings");
          add_upstream(field, s->get());
        }
      } else if (const auto* tbl = n.as_table()) {
        for (const auto& [name, url] : *tbl) {
          const auto* s = url.as_string();
          if (s == nullptr) throw std::invalid_argument("table '" + key + "': values must be URL strings");
          field[std::string(name.str())] = s->get();
        }
      } else if (const auto* s = n.as_string()) {
        add_upstream(field, s->get());
      } else {
        throw type_error(key, "\"NAME=URL\", an array of them, or a table NAME = URL", n);
      }
    };
    merged_.insert(key);
    return app_.add_option("--" + key, from_command_line, help)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->default_str("");
  }

  // Repeatable NAME|CRON|HANDLER[|BODY] on the command line; in the file an
  // array of tables ([[schedule]]) with every field (schedule_config.hpp).
  // Both kinds are kept, the file's first.
  CLI::Option* schedules(const std::string& key, std::vector<std::string>& from_command_line,
                         std::vector<schedule_options>& field, const std::string& help) {
    readers_[key] = [key, &field](const toml::node& n) {
      const auto* arr = n.as_array();
      if (arr == nullptr) throw type_error(key, "an array of tables ([[" + key + "]])", n);
      for (const auto& item : *arr) {
        const auto* tbl = item.as_table();
        if (tbl == nullptr) throw type_error(key, "an array of tables ([[" + key + "]])", item);
        field.push_back(detail::schedule_from_toml(*tbl));
      }
    };
    merged_.insert(key);
    return app_.add_option("--" + key, from_command_line, help)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->default_str("");
  }

  // Repeatable NAME=ATTEMPTS[,BASE[,CAP]][;jitter=none] on the command line; in the file a
  // table NAME = "ATTEMPTS[,BASE[,CAP]][;jitter=none]". A later one of a name wins.
  CLI::Option* retries(const std::string& key, std::vector<std::string>& from_command_line,
                       std::map<std::string, job_retry_policy>& field, const std::string& help) {
    readers_[key] = [key, &field](const toml::node& n) {
      const auto* tbl = n.as_table();
      if (tbl == nullptr) throw type_error(key, "a table NAME = \"ATTEMPTS[,BASE[,CAP]][;jitter=none]\"", n);
      for (const auto& [name, value] : *tbl) {
        const auto* s = value.as_string();
        if (s == nullptr)
          throw std::invalid_argument("table '" + key + "': values must be \"ATTEMPTS[,BASE[,CAP]][;jitter=none]\"");
        field[std::string(name.str())] = detail::retry_from_text(std::string(name.str()), s->get());
      }
    };
    merged_.insert(key);
    return app_.add_option("--" + key, from_command_line, help)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->default_str("");
  }

  // Sets the fields from a TOML file: every key must be one of the options,
  // of the right type. A key also given on the command line is left as the
  // command line set it, except upstreams, which merge (the command line's
  // win per name, as they are added afterwards).
  void read_file(const std::string& path, const config_file_reader& read) const {
    toml::table table;
    const std::string text = read(path);
    try {
      table = toml::parse(text, path);
    } catch (const toml::parse_error& e) {
      std::ostringstream msg;
      msg << "config file " << path << ": " << e.description() << " (line " << e.source().begin.line << ")";
      throw std::invalid_argument(msg.str());
    }
    for (const auto& [k, node] : table) {
      const std::string key(k.str());
      const auto it = readers_.find(key);
      if (it == readers_.end()) throw unknown_key(path, key);
      if (!merged_.contains(key) && app_.count("--" + key) > 0) continue;
      try {
        it->second(node);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("config file " + path + ": " + e.what());
      }
    }
  }

 private:
  static std::invalid_argument type_error(const std::string& key, const std::string& expected, const toml::node& n) {
    return std::invalid_argument("key '" + key + "' must be " + expected + " (line " +
                                 std::to_string(n.source().begin.line) + ")");
  }
  static std::invalid_argument unknown_key(const std::string& path, const std::string& key) {
    return std::invalid_argument("config file " + path + ": unknown key '" + key + "'");
  }
  static std::string join(const std::vector<std::string>& names) {
    std::string out = "{";
    for (const auto& n : names) out += (out.size() > 1 ? "," : "") + n;
    return out + "}";
  }

  CLI::App& app_;
  std::map<std::string, reader> readers_;
  std::set<std::string> merged_;
};

}  // namespace

std::string read_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) throw std::invalid_argument("config file " + path + ": cannot be read");
  return std::move(text).str();
}

// The CLI11 app and the option table, built once (the fuzzer parses
// thousands of command lines a second with one). Each parse starts from
// default server_options; CLI11 clears its own results on a second parse.
struct command_line_parser::impl {
  impl()
      : app_(
            "hourglassd: a deadline-aware job daemon. Jobs are POSTed to /v1/jobs/{handler} with their budget "
            "in Request-Timeout (gRPC syntax), grpc-timeout, X-Envoy-Expected-Rq-Timeout-Ms or Connect-Timeout-Ms.\n"
            "Durations are written like 250ms, 2s, 1m.",
            "hourglassd"),
        t_(app_) {
    app_.option_defaults()->always_capture_default()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app_.get_formatter()->column_width(40);

    app_.add_option("--config", config_, "TOML file with the same keys, without the dashes (the command line wins)")
        ->type_name("FILE")
        ->always_capture_default(false);
    t_.text("listen", o_.listen, "ADDR:PORT to listen on ([v6]:PORT for IPv6; port 0 picks one)")
        ->type_name("ADDR:PORT");
    t_.count("workers", o_.workers, "worker threads running jobs (default: one per CPU)", 1, 4096);
    t_.count("io-threads", o_.io_threads, "threads serving sockets", 1, 256);
    t_.count("queue-capacity", o_.queue_capacity, "jobs that may wait; more are shed with 503 queue_full", 1,
             100'000'000);
    t_.time("default-budget", o_.default_budget, "budget of a request without a budget header");
    t_.time("max-budget", o_.max_budget, "larger budgets are clamped to this; also async jobs' run limit");
    t_.time("min-budget", o_.min_budget, "less left at admission: 504 deadline_exceeded/admission");
    t_.upstreams("upstream", upstreams_, o_.upstreams,
                 "NAME=URL the call handler may reach (repeatable; http://host:port[/prefix])")
        ->type_name("NAME=URL");
    t_.time("call-reserve", o_.call_reserve, "kept back from the remaining budget on outgoing calls");
    t_.count("breaker-failures", o_.breaker_failures, "failed calls in a row that open an upstream's circuit breaker",
             1, 1'000'000);
    t_.time("breaker-open", o_.breaker_open, "how long an open breaker fails calls at once before one probe");
    t_.time("drain-timeout", o_.drain_timeout, "on SIGTERM/SIGINT, how long running jobs may finish");
    t_.count("max-body", o_.max_body, "largest request body in bytes (413 above)")->type_name("BYTES");
    t_.scheduling("policy", o_.scheduling, "hourglass, or fifo: every deadline check off (for comparisons)")
        ->type_name("POLICY");
    t_.text("auth-token-file", o_.auth_token_file,
            "file holding the bearer token every request but /healthz must carry (at least 16 characters)")
        ->type_name("FILE")
        ->always_capture_default(false);
    t_.text("admin-token-file", o_.admin_token_file,
            "file holding the bearer token the admin actions must carry (pausing and resuming queues; replaying, "
            "deleting and purging dead jobs); it also reads what the access token reads. At least 16 characters, "
            "not the access token. Without it, admin actions are refused")
        ->type_name("FILE")
        ->always_capture_default(false);
    t_.texts("allowed-host", o_.allowed_hosts,
             "a Host name this daemon answers to besides addresses and localhost (repeatable; .example.com: it and "
             "its subdomains; *: any); others get 421, against DNS rebinding")
        ->type_name("NAME");
    t_.flag("allow-unauthenticated", o_.allow_unauthenticated,
            "allow a non-loopback --listen address without --auth-token-file");
    t_.time("header-timeout", o_.header_timeout, "time to receive a request's headers (slow clients are cut off)");
    t_.time("body-timeout", o_.body_timeout, "time to receive a request's body");
    t_.time("write-timeout", o_.write_timeout,
            "time to write a response, or a streamed chunk (a reader that stops reading is cut off)");
    t_.time("idle-timeout", o_.idle_timeout, "keep-alive connections idle longer are closed");
    t_.count("max-connections", o_.max_connections, "open connections; more are closed at once", 1, 1'000'000);
    t_.time("metrics-cache", o_.metrics_cache,
            "GET /metrics renders at most once per this; other scrapes get that page (0s: every scrape renders)");
    t_.time("async-ttl", o_.async_ttl, "how long a finished async job's result is kept");
    t_.time("max-delay", o_.max_delay, "the furthest Job-Delay or Job-Not-Before may put an async job's start");
    t_.count("max-job-depth", o_.max_job_depth,
             "how deep a family of child jobs may grow (a job without a parent is at 0); deeper: 409 too_deep", 0,
             1'000'000);
    t_.count("max-list-scans", o_.max_list_scans,
             "fleet: job listings walked by SCAN a second (each reads up to 10,000 keys); more: 429", 1, 100'000);
    t_.count("max-children", o_.max_children, "child jobs one parent may have; more: 409 too_many_children", 0,
             1'000'000);
    t_.schedules("schedule", schedules_, o_.schedules,
                 "NAME|CRON|HANDLER[|BODY]: a periodic job (repeatable; CRON five fields, @hourly or @every 30s)")
        ->type_name("SCHEDULE");
    t_.retries("retry", retries_, o_.handler_retries,
               "NAME=ATTEMPTS[,BASE[,CAP]][;jitter=none]: async jobs of handler NAME are retried (repeatable; e.g. "
               "call=5,200ms,30s)")
        ->type_name("NAME=POLICY");
    t_.count("async-max-jobs", o_.async_max_jobs, "async jobs remembered at once (finished or not)", 1, 100'000'000);
    t_.count("async-max-scheduled", o_.async_max_scheduled,
             "in-memory async jobs delayed or waiting for a retry, held apart from --async-max-jobs", 1, 100'000'000);
    t_.count("max-result", o_.max_result,
             "largest result an async job keeps, in bytes; larger: the job ends error/result_too_large", 1,
             std::size_t{32} << 20)
        ->type_name("BYTES");
    t_.count("async-max-result-bytes", o_.async_max_result_bytes,
             "bytes of results the memory store holds; past it the oldest finished jobs are forgotten", 1,
             std::size_t{1} << 40)
        ->type_name("BYTES");
    t_.text("broker", o_.broker,
            "redis://HOST:PORT[/DB] or redis+cluster://HOST:PORT[,HOST:PORT...]: fleet mode, async jobs on a "
            "durable Redis queue")
        ->type_name("URL")
        ->always_capture_default(false);
    t_.text("queue", o_.queue, "fleet: the queue's name")->type_name("NAME");
    t_.count("queue-shards", o_.queue_shards,
             "fleet: the queue over this many shards, each its own stream and hash slot (a cluster spreads them "
             "over its masters); the workers split among them",
             1, 64);
    t_.text("consumer", o_.consumer, "fleet: this daemon's unique name (default: <hostname>:<port>)")
        ->type_name("NAME")
        ->always_capture_default(false);
    t_.time("lease", o_.lease, "fleet: a daemon silent this long is presumed dead and its jobs reclaimed");
    t_.count("max-deliveries", o_.max_deliveries,
             "fleet: starts of a job whose workers died before it is dead-lettered", 1, 1000);
    t_.count("prefetch", o_.prefetch,
             "fleet: entries held beyond --workers, waiting for a worker (bigger batches; admission counts only "
             "--workers)",
             0, 100000);
    t_.flag("produce-only", o_.produce_only,
            "fleet: take, answer for and cancel jobs but run none (a front daemon; others consume)");
    t_.flag("refuse-while-paused", o_.refuse_while_paused,
            "fleet: while the queue is paused, refuse new async jobs (503 queue_paused) instead of queueing them");
    t_.time("result-ttl", o_.result_ttl, "fleet: how long a job's outcome is kept");
    t_.time("dead-ttl", o_.dead_ttl, "fleet: how long a dead-lettered job is kept, whole, for a replay");
    t_.count("dead-max", o_.dead_max, "fleet: the most dead-lettered jobs listed; the oldest beyond are dropped", 1,
             100'000'000);
    t_.time("idempotency-ttl", o_.idempotency_ttl, "how long an Idempotency-Key names its job");
    t_.count("broker-replicas", o_.broker_replicas,
             "fleet: answer 202 once the broker's master and this many replicas hold the job (WAIT); 0: the master", 0,
             16);
    t_.time("broker-replica-timeout", o_.broker_replica_timeout,
            "fleet: how long an enqueue waits for --broker-replicas before it answers 503");
    t_.text("broker-password-file", o_.broker_password_file, "fleet: file holding the broker's AUTH password")
        ->type_name("FILE")
        ->always_capture_default(false);
    t_.text("log-level", o_.log_level, "trace, debug, info (one line per job), warn, error, critical, off",
            {"trace", "debug", "info", "warn", "error", "critical", "off"})
        ->type_name("LEVEL");
  }

  server_options o_;
  std::string config_;
  std::vector<std::string> upstreams_;
  std::vector<std::string> schedules_;
  std::vector<std::string> retries_;
  CLI::App app_;
  option_table t_;
};

command_line_parser::command_line_parser() : impl_(std::make_unique<impl>()) {}
command_line_parser::~command_line_parser() = default;

command_line_result command_line_parser::parse(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                                               const config_file_reader& read_file) {
  auto& p = *impl_;
  p.o_ = server_options{};
  p.config_.clear();
  p.upstreams_.clear();
  p.schedules_.clear();
  p.retries_.clear();
  try {
    p.app_.parse(argc, argv);
    if (!p.config_.empty()) p.t_.read_file(p.config_, read_file);
    for (const auto& u : p.upstreams_) add_upstream(p.o_.upstreams, u);
    for (const auto& s : p.schedules_) p.o_.schedules.push_back(detail::schedule_from_flag(s));
    for (const auto& r : p.retries_) {
      const auto eq = r.find('=');
      if (eq == std::string::npos || eq == 0)
        throw std::invalid_argument("--retry must be NAME=ATTEMPTS[,BASE[,CAP]][;jitter=none], got '" + r + "'");
      p.o_.handler_retries[r.substr(0, eq)] = detail::retry_from_text(r.substr(0, eq), r.substr(eq + 1));
    }
    validate(p.o_);
  } catch (const CLI::ParseError& e) {
    const int code = p.app_.exit(e, out, err);
    return {std::nullopt, code == 0 ? 0 : 2};
  } catch (const std::invalid_argument& e) {
    err << "hourglassd: error: " << e.what() << "\n";
    return {std::nullopt, 2};
  }
  return {p.o_, 0};
}

command_line_result parse_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                                       const config_file_reader& read_file) {
  return command_line_parser().parse(argc, argv, out, err, read_file);
}

}  // namespace hourglass::server
