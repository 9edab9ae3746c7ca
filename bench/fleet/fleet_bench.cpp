#include "fleet/fleet_bench.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "hourglass/executor.hpp"
#include "hourglass/fleet/consumer.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/support/json.hpp"
#include "hourglass/support/url.hpp"

namespace hourglass::bench {

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using fleet::redis_connection;
using fleet::redis_reply;

// The connections' io_context, run by two threads of its own.
struct broker_io {
  explicit broker_io(const std::string& url) {
    const support::redis_url u = support::parse_redis_url(url, "--broker");
    endpoint = {u.host, u.port, u.db, ""};
    for (int i = 0; i < 2; ++i) threads.emplace_back([this] { io.run(); });
  }
  ~broker_io() {
    work.reset();
    io.stop();
    for (auto& t : threads) t.join();
  }
  std::unique_ptr<redis_connection> connect() { return std::make_unique<redis_connection>(io, endpoint); }

  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work{io.get_executor()};
  std::vector<std::thread> threads;
  fleet::redis_endpoint endpoint;
};

redis_reply must(redis_connection& c, std::vector<std::string> args) {
  redis_reply r = c.call(context(), std::move(args));
  if (r.is_error()) throw std::runtime_error("redis: " + r.str);
  return r;
}

// Every command Redis has run so far (INFO commandstats), scripts' inner ones included.
std::uint64_t redis_calls(redis_connection& c) {
  const std::string info = must(c, {"INFO", "commandstats"}).str;
  std::uint64_t total = 0;
  for (auto pos = info.find("calls="); pos != std::string::npos; pos = info.find("calls=", pos + 6)) {
    total += std::strtoull(info.c_str() + pos + 6, nullptr, 10);
  }
  return total;
}

double seconds(steady::duration d) { return std::chrono::duration<double>(d).count(); }

std::string unique(const std::string& what) { return "bench-" + what + "-" + std::to_string(::getpid()); }

void drop_queue(redis_connection& c, const std::string& name) {
  for (const char* k : {"stream", "slots", "stats", "dead"}) must(c, {"DEL", "hg:{" + name + "}:" + k});
}

// ---- the broker's own limit ----

double raw_rate(broker_io& b, std::size_t consumers, std::uint64_t jobs, std::size_t producers, double& calls_per_job) {
  auto admin = b.connect();
  const std::string key = unique("raw-" + std::to_string(consumers));
  must(*admin, {"XGROUP", "CREATE", key, "g", "0", "MKSTREAM"});
  const std::uint64_t calls0 = redis_calls(*admin);
  std::atomic<std::uint64_t> acked{0};
  const auto t0 = steady::now();
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      auto c = b.connect();
      for (std::uint64_t i = p; i < jobs; i += producers) must(*c, {"XADD", key, "*", "id", std::to_string(i)});
    });
  }
  for (std::size_t i = 0; i < consumers; ++i) {
    threads.emplace_back([&, i] {
      auto c = b.connect();
      while (acked.load() < jobs) {
        const redis_reply r = must(*c, {"XREADGROUP", "GROUP", "g", "c" + std::to_string(i), "COUNT", "16", "BLOCK",
                                        "50", "STREAMS", key, ">"});
        if (!r.is_array()) continue;
        for (const auto& e : r.elements[0].elements[1].elements) {
          must(*c, {"XACK", key, "g", e.elements[0].str});
          ++acked;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = seconds(steady::now() - t0);
  calls_per_job = static_cast<double>(redis_calls(*admin) - calls0) / static_cast<double>(jobs);
  must(*admin, {"DEL", key});
  return static_cast<double>(jobs) / elapsed;
}

// ---- hourglass consumers ----

// One daemon's worth: its executor, connections, queue and consumer.
struct member {
  member(broker_io& b, const std::string& queue_name, const std::string& name, std::size_t slots,
         fleet::job_runner runner)
      : jobs(executor_options{.workers = slots}),
        commands(b.connect()),
        reader(b.connect()),
        queue(*commands, {.name = queue_name, .result_ttl = 60s, .idempotency_ttl = 60s}),
        consumer(queue, *reader, jobs, std::move(runner), {.name = name, .slots = slots, .lease = 5s}) {}

  executor jobs;
  std::unique_ptr<redis_connection> commands;
  std::unique_ptr<redis_connection> reader;
  fleet::job_queue queue;
  fleet::consumer consumer;
};

double hourglass_rate(broker_io& b, std::size_t consumers, const fleet_options& o, double& calls_per_job) {
  auto admin = b.connect();
  const std::string name = unique("tp-" + std::to_string(consumers));
  std::vector<std::unique_ptr<member>> fleet;
  fleet::job_runner noop{.run = [](const context&, const fleet::delivered_job&) { return fleet::job_output{}; }};
  for (std::size_t i = 0; i < consumers; ++i) {
    fleet.push_back(std::make_unique<member>(b, name, "c" + std::to_string(i), o.slots, noop));
    fleet.back()->consumer.start(context());
  }
  const auto written = [&] {
    std::uint64_t n = 0;
    for (auto& m : fleet) n += m->consumer.stats().outcomes_written;
    return n;
  };
  const std::uint64_t calls0 = redis_calls(*admin);
  const auto t0 = steady::now();
  std::vector<std::thread> producers;
  for (std::size_t p = 0; p < o.producers; ++p) {
    producers.emplace_back([&, p] {
      auto c = b.connect();
      fleet::job_queue q(*c, {.name = name, .result_ttl = 60s, .idempotency_ttl = 60s});
      for (std::uint64_t i = p; i < o.jobs; i += o.producers) q.enqueue(context(), {.handler = "noop"});
    });
  }
  for (auto& t : producers) t.join();
  while (written() < o.jobs) std::this_thread::sleep_for(1ms);
  const double elapsed = seconds(steady::now() - t0);
  calls_per_job = static_cast<double>(redis_calls(*admin) - calls0) / static_cast<double>(o.jobs);
  for (auto& m : fleet) m->consumer.stop();
  fleet.clear();
  drop_queue(*admin, name);
  return static_cast<double>(o.jobs) / elapsed;
}

// ---- goodput under overload ----

struct fleet_tally {
  std::atomic<std::uint64_t> offered{0}, refused{0}, ran{0}, in_time{0}, late{0};
};

std::string stamp() { return std::to_string(steady::now().time_since_epoch().count()); }
bool started_in_time(const std::string& payload, duration freshness) {
  const steady::time_point sent{steady::duration(std::strtoll(payload.c_str(), nullptr, 10))};
  return steady::now() - sent <= freshness;
}

// Offers jobs on a fixed schedule (`rate`/s for `length`) from the producer
// threads, each on a connection of its own; a producer that falls behind
// sends at once to catch up (the schedule, not the broker, sets the load).
// Returns how long the offering took (longer than `length` when the
// producers could not keep up: goodput is counted over this).
double offer(broker_io& b, double rate, const fleet_options& o, fleet_tally& t,
             const std::function<void(redis_connection&)>& send_one) {
  const auto t0 = steady::now();
  const auto total = static_cast<std::uint64_t>(rate * seconds(o.length));
  const auto gap = std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(1.0 / rate));
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < o.producers; ++p) {
    threads.emplace_back([&, p] {
      auto c = b.connect();
      for (std::uint64_t i = p; i < total; i += o.producers) {
        std::this_thread::sleep_until(t0 + gap * static_cast<std::int64_t>(i));
        ++t.offered;
        send_one(*c);
      }
    });
  }
  for (auto& th : threads) th.join();
  return std::max(seconds(steady::now() - t0), seconds(o.length));
}

fleet_goodput finish_goodput(const char* who, double load, double rate, double offered_for, const fleet_tally& t) {
  fleet_goodput g;
  g.consumer = who;
  g.load = load;
  g.offered_per_s = static_cast<double>(t.offered) / offered_for;
  (void)rate;
  g.offered = t.offered;
  g.refused = t.refused;
  g.ran = t.ran;
  g.ran_in_time = t.in_time;
  g.ran_too_late = t.late;
  g.goodput_per_s = static_cast<double>(t.in_time) / offered_for;
  return g;
}

fleet_goodput hourglass_goodput(broker_io& b, double load, double rate, const fleet_options& o) {
  auto admin = b.connect();
  const std::string name = unique("ov-" + std::to_string(static_cast<int>(load * 10)));
  fleet_tally t;
  fleet::job_runner sleeper{.run = [&](const context& ctx, const fleet::delivered_job& j) {
    const bool in_time = started_in_time(j.payload, o.freshness);
    ctx.sleep_for(o.service_time);
    ++t.ran;
    ++(in_time ? t.in_time : t.late);
    return fleet::job_output{};
  }};
  std::vector<std::unique_ptr<member>> fleet;
  for (std::size_t i = 0; i < o.overload_consumers; ++i) {
    fleet.push_back(std::make_unique<member>(b, name, "c" + std::to_string(i), o.slots, sleeper));
    fleet.back()->consumer.start(context());
  }
  const double offered_for = offer(b, rate, o, t, [&](redis_connection& c) {
    fleet::job_queue q(c, {.name = name, .result_ttl = 60s, .idempotency_ttl = 60s});
    const fleet::enqueued e = q.enqueue(context(), {.handler = "sleep", .payload = stamp(), .freshness = o.freshness});
    if (e.verdict == fleet::enqueued::kind::refused) ++t.refused;
  });
  std::this_thread::sleep_for(o.freshness + o.service_time * 2);  // what can still start in time does
  for (auto& m : fleet) m->consumer.stop();
  fleet.clear();
  drop_queue(*admin, name);
  return finish_goodput("hourglass", load, rate, offered_for, t);
}

// What a Celery- or Sidekiq-style worker does: read, run, acknowledge; no check.
fleet_goodput naive_goodput(broker_io& b, double load, double rate, const fleet_options& o) {
  auto admin = b.connect();
  const std::string key = unique("naive-" + std::to_string(static_cast<int>(load * 10)));
  must(*admin, {"XGROUP", "CREATE", key, "g", "0", "MKSTREAM"});
  fleet_tally t;
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (std::size_t i = 0; i < o.overload_consumers * o.slots; ++i) {
    workers.emplace_back([&, i] {
      auto c = b.connect();
      while (!stop) {
        const redis_reply r = must(*c, {"XREADGROUP", "GROUP", "g", "w" + std::to_string(i), "COUNT", "1", "BLOCK",
                                        "50", "STREAMS", key, ">"});
        if (!r.is_array()) continue;
        for (const auto& e : r.elements[0].elements[1].elements) {
          const bool in_time = started_in_time(e.elements[1].elements[1].str, o.freshness);
          std::this_thread::sleep_for(o.service_time);
          ++t.ran;
          ++(in_time ? t.in_time : t.late);
          must(*c, {"XACK", key, "g", e.elements[0].str});
        }
      }
    });
  }
  const double offered_for = offer(b, rate, o, t, [&](redis_connection& c) {
    must(c, {"XADD", key, "*", "t", stamp()});
  });
  std::this_thread::sleep_for(o.freshness + o.service_time * 2);
  stop = true;
  for (auto& w : workers) w.join();
  must(*admin, {"DEL", key});
  return finish_goodput("naive", load, rate, offered_for, t);
}

}  // namespace

fleet_report run_fleet(const fleet_options& o, const std::function<void(const std::string&)>& progress) {
  if (o.slots == 0 || o.jobs == 0 || o.producers == 0 || o.overload_consumers == 0) {
    throw std::invalid_argument("--slots, --jobs, --producers and --overload-consumers must be positive");
  }
  if (o.service_time <= duration::zero() || o.freshness <= duration::zero() || o.length <= duration::zero()) {
    throw std::invalid_argument("--service-time, --freshness and --duration must be positive");
  }
  broker_io b(o.broker);
  {
    auto c = b.connect();
    try {
      must(*c, {"PING"});
    } catch (const std::exception& e) {
      throw std::runtime_error("cannot use the broker " + o.broker + ": " + e.what());
    }
  }
  fleet_report r;
  r.broker = o.broker;
  for (const std::size_t n : o.consumers) {
    fleet_throughput t;
    t.consumers = n;
    t.raw_jobs_per_s = raw_rate(b, n, o.jobs, o.producers, t.raw_calls_per_job);
    t.hourglass_jobs_per_s = hourglass_rate(b, n, o, t.redis_calls_per_job);
    char line[160];
    std::snprintf(line, sizeof line, "throughput, %zu consumers: raw %.0f jobs/s, hourglass %.0f jobs/s", n,
                  t.raw_jobs_per_s, t.hourglass_jobs_per_s);
    progress(line);
    r.throughput.push_back(t);
  }
  r.capacity_per_s = static_cast<double>(o.overload_consumers * o.slots) /
                     std::chrono::duration<double>(o.service_time).count();
  std::vector<double> rates;
  if (o.rate > 0) {
    rates.push_back(o.rate);
  } else {
    for (const double l : o.loads) rates.push_back(l * r.capacity_per_s);
  }
  for (const double rate : rates) {
    const double load = rate / r.capacity_per_s;
    r.goodput.push_back(hourglass_goodput(b, load, rate, o));
    r.goodput.push_back(naive_goodput(b, load, rate, o));
    char line[160];
    std::snprintf(line, sizeof line, "overload %.1fx: goodput hourglass %.0f/s, naive %.0f/s", load,
                  r.goodput[r.goodput.size() - 2].goodput_per_s, r.goodput.back().goodput_per_s);
    progress(line);
  }
  return r;
}

void print_table(std::ostream& out, const fleet_report& r) {
  char line[256];
  out << "broker " << r.broker << "\n\n";
  out << "| consumers | raw XADD+XREADGROUP+XACK jobs/s | hourglass jobs/s | ratio | Redis calls/job (raw, hourglass) "
         "|\n";
  out << "|---|---|---|---|---|\n";
  for (const auto& t : r.throughput) {
    std::snprintf(line, sizeof line, "| %zu | %.0f | %.0f | %.2f | %.1f, %.1f |\n", t.consumers, t.raw_jobs_per_s,
                  t.hourglass_jobs_per_s, t.hourglass_jobs_per_s / t.raw_jobs_per_s, t.raw_calls_per_job,
                  t.redis_calls_per_job);
    out << line;
  }
  std::snprintf(line, sizeof line, "\ncapacity %.0f jobs/s\n\n", r.capacity_per_s);
  out << line;
  out << "| consumer | load | offered/s | refused | ran | in time | too late (wasted) | goodput/s |\n";
  out << "|---|---|---|---|---|---|---|---|\n";
  for (const auto& g : r.goodput) {
    std::snprintf(line, sizeof line, "| %s | %.1fx | %.0f | %llu | %llu | %llu | %llu | %.0f |\n", g.consumer.c_str(),
                  g.load, g.offered_per_s, static_cast<unsigned long long>(g.refused),
                  static_cast<unsigned long long>(g.ran), static_cast<unsigned long long>(g.ran_in_time),
                  static_cast<unsigned long long>(g.ran_too_late), g.goodput_per_s);
    out << line;
  }
}

std::string to_json(const fleet_report& r) {
  support::json_writer j;
  j.begin_object().member("broker", r.broker).member("capacity_per_s", r.capacity_per_s);
  j.key("throughput").begin_array();
  for (const auto& t : r.throughput) {
    j.begin_object().member("consumers", static_cast<std::uint64_t>(t.consumers));
    j.member("raw_jobs_per_s", t.raw_jobs_per_s).member("hourglass_jobs_per_s", t.hourglass_jobs_per_s);
    j.member("raw_calls_per_job", t.raw_calls_per_job).member("redis_calls_per_job", t.redis_calls_per_job);
    j.end_object();
  }
  j.end_array().key("goodput").begin_array();
  for (const auto& g : r.goodput) {
    j.begin_object().member("consumer", g.consumer).member("load", g.load);
    j.member("offered_per_s", g.offered_per_s).member("offered", g.offered).member("refused", g.refused);
    j.member("ran", g.ran).member("ran_in_time", g.ran_in_time).member("ran_too_late", g.ran_too_late);
    j.member("goodput_per_s", g.goodput_per_s).end_object();
  }
  return j.end_array().end_object().take();
}

}  // namespace hourglass::bench
