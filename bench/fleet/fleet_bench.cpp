#include "fleet/fleet_bench.hpp"

#include "fleet/broker_cost.hpp"
#include "fleet/fleet_parts.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <semaphore>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "hourglass/executor.hpp"
#include "hourglass/fleet/consumer.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/support/json.hpp"
#include "hourglass/support/url.hpp"

namespace hourglass::bench {

namespace {

using namespace std::chrono_literals;
using fleet::redis_client;
using fleet::redis_reply;
using fleet_parts::broker_io;
using fleet_parts::drop_queue;
using fleet_parts::fleet_members;
using fleet_parts::noop;
using fleet_parts::seconds;
using fleet_parts::start_fleet;
using fleet_parts::steady;
using fleet_parts::stop_fleet;
using fleet_parts::unique;
using fleet_parts::wait_written;
using fleet_parts::windowed;

void produce(broker_io& b, const std::string& name, const fleet_options& o, std::size_t bulk) {
  fleet_parts::produce(b, name, o.jobs, o.producers, o.window, bulk);
}

// ---- the broker's own limit ----

double raw_rate(broker_io& b, std::size_t consumers, const fleet_options& o, double& calls_per_job) {
  auto admin = b.connect();
  const std::string key = unique("raw-" + std::to_string(consumers));
  must(*admin, {"XGROUP", "CREATE", key, "g", "0", "MKSTREAM"});
  const broker_cost cost(*admin);
  std::atomic<std::uint64_t> acked{0};
  const auto t0 = steady::now();
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < o.producers; ++p) {
    threads.emplace_back([&, p] {
      auto c = b.connect();
      windowed(p, o.jobs, o.producers, o.window, [&](std::uint64_t i, std::function<void()> done) {
        c->async_call(context(), {"XADD", key, "*", "id", std::to_string(i)},
                      [done = std::move(done)](fleet::redis_result) { done(); });
      });
    });
  }
  for (std::size_t i = 0; i < consumers; ++i) {
    threads.emplace_back([&, i] {
      auto reader = b.connect();
      auto acker = b.connect();  // acknowledgements pipelined beside the blocking reads
      const std::string name = "c" + std::to_string(i);
      std::atomic<int> in_flight{0};
      while (acked.load() < o.jobs) {
        const redis_reply r = must(*reader, {"XREADGROUP", "GROUP", "g", name, "COUNT", std::to_string(o.slots * 16),
                                             "BLOCK", "50", "STREAMS", key, ">"});
        if (!r.is_array()) continue;
        std::vector<std::string> ack{"XACK", key, "g"};
        for (const auto& e : r.elements[0].elements[1].elements) ack.push_back(e.elements[0].str);
        const std::uint64_t n = ack.size() - 3;
        ++in_flight;
        acker->async_call(context(), std::move(ack), [&, n](fleet::redis_result) {
          acked += n;
          --in_flight;
        });
      }
      while (in_flight.load() > 0) std::this_thread::sleep_for(100us);
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = seconds(steady::now() - t0);
  calls_per_job = cost.calls_per(o.jobs);
  must(*admin, {"DEL", key});
  return static_cast<double>(o.jobs) / elapsed;
}

// End to end: producers and consumers at once.
double hourglass_rate(broker_io& b, std::size_t consumers, const fleet_options& o, fleet_throughput& t) {
  auto admin = b.connect();
  const std::string name = unique("tp-" + std::to_string(consumers));
  fleet_members fleet = start_fleet(b, name, consumers, o.slots, o.prefetch, noop);
  const broker_cost cost(*admin);
  const auto t0 = steady::now();
  produce(b, name, o, 1);
  wait_written(fleet, o.jobs);
  const double elapsed = seconds(steady::now() - t0);
  t.redis_calls_per_job = cost.calls_per(o.jobs);
  t.redis_cpu_us_per_job = cost.cpu_us_per(o.jobs);
  t.commands = cost.breakdown(o.jobs);
  stop_fleet(fleet);
  drop_queue(*admin, name);
  return static_cast<double>(o.jobs) / elapsed;
}

// Enqueue alone (one job per call, or in bulks), then the drain alone.
void enqueue_then_drain(broker_io& b, std::size_t consumers, const fleet_options& o, fleet_throughput& t) {
  auto admin = b.connect();
  const std::string name = unique("ed-" + std::to_string(consumers));
  fleet::job_queue q(*admin, {.name = name});
  q.ensure_group(context());
  auto t0 = steady::now();
  produce(b, name, o, 1);
  t.enqueue_jobs_per_s = static_cast<double>(o.jobs) / seconds(steady::now() - t0);
  drop_queue(*admin, name);
  q.ensure_group(context());
  t0 = steady::now();
  produce(b, name, o, o.bulk);
  t.bulk_jobs_per_s = static_cast<double>(o.jobs) / seconds(steady::now() - t0);
  t0 = steady::now();
  fleet_members fleet = start_fleet(b, name, consumers, o.slots, o.prefetch, noop);
  wait_written(fleet, o.jobs);
  t.drain_jobs_per_s = static_cast<double>(o.jobs) / seconds(steady::now() - t0);
  stop_fleet(fleet);
  drop_queue(*admin, name);
}

std::string stamp() { return std::to_string(steady::now().time_since_epoch().count()); }
steady::duration since(const std::string& stamp) {
  return steady::now() - steady::time_point{steady::duration(std::strtoll(stamp.c_str(), nullptr, 10))};
}

// Enqueue -> start, for jobs offered at `rate` on a schedule for about 2 s.
void start_latency(broker_io& b, std::size_t consumers, double rate, const fleet_options& o, fleet_throughput& t) {
  auto admin = b.connect();
  const std::string name = unique("lat-" + std::to_string(consumers));
  std::mutex mu;
  std::vector<double> waits_ms;
  const fleet::job_runner record{.run = [&](const context&, const fleet::delivered_job& j) {
    const double ms = std::chrono::duration<double, std::milli>(since(j.payload)).count();
    std::lock_guard lock(mu);
    waits_ms.push_back(ms);
    return fleet::job_output{};
  }};
  fleet_members fleet = start_fleet(b, name, consumers, o.slots, o.prefetch, record);
  const auto n = static_cast<std::uint64_t>(std::clamp(rate * 2, 100.0, static_cast<double>(o.jobs)));
  const auto gap = std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(1.0 / rate));
  fleet::job_queue q(*admin, {.name = name, .result_ttl = 60s, .idempotency_ttl = 60s});
  const auto t0 = steady::now();
  for (std::uint64_t i = 0; i < n; ++i) {
    std::this_thread::sleep_until(t0 + gap * static_cast<std::int64_t>(i));
    q.async_enqueue(context(), {.handler = "noop", .payload = stamp()}, [](auto) {});
  }
  wait_written(fleet, n);
  stop_fleet(fleet);
  drop_queue(*admin, name);
  std::sort(waits_ms.begin(), waits_ms.end());
  const auto at = [&](double q) {
    return waits_ms[static_cast<std::size_t>(q * static_cast<double>(waits_ms.size() - 1))];
  };
  if (waits_ms.empty()) return;
  t.latency_p50_ms = at(0.5);
  t.latency_p99_ms = at(0.99);
  t.latency_rate = rate;
}

// ---- goodput under overload ----

struct fleet_tally {
  std::atomic<std::uint64_t> offered{0}, refused{0}, ran{0}, in_time{0}, late{0};
};

bool started_in_time(const std::string& payload, duration freshness) { return since(payload) <= freshness; }

// Offers jobs on a fixed schedule (`rate`/s for `length`) from the producer
// threads, each on a connection of its own; a producer that falls behind
// sends at once to catch up (the schedule, not the broker, sets the load).
// Returns how long the offering took (longer than `length` when the
// producers could not keep up: goodput is counted over this).
double offer(broker_io& b, double rate, const fleet_options& o, fleet_tally& t,
             const std::function<void(redis_client&)>& send_one) {
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
  fleet_members fleet = start_fleet(b, name, o.overload_consumers, o.slots, o.prefetch, sleeper);
  const double offered_for = offer(b, rate, o, t, [&](redis_client& c) {
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
  const double offered_for = offer(b, rate, o, t, [&](redis_client& c) { must(c, {"XADD", key, "*", "t", stamp()}); });
  std::this_thread::sleep_for(o.freshness + o.service_time * 2);
  stop = true;
  for (auto& w : workers) w.join();
  must(*admin, {"DEL", key});
  return finish_goodput("naive", load, rate, offered_for, t);
}

// appendonly yes + appendfsync always while it lives (a 202 is then on
// disk), the broker's own settings back after.
struct durable_broker {
  explicit durable_broker(broker_io& b) : admin(b.connect()) {
    const redis_reply was = must(*admin, {"CONFIG", "GET", "append*"});
    for (std::size_t i = 0; i + 1 < was.elements.size(); i += 2) {
      if (was.elements[i].str == "appendonly") appendonly = was.elements[i + 1].str;
      if (was.elements[i].str == "appendfsync") appendfsync = was.elements[i + 1].str;
    }
    must(*admin, {"CONFIG", "SET", "appendonly", "yes"});
    must(*admin, {"CONFIG", "SET", "appendfsync", "always"});
    // Turning the AOF on rewrites it first: wait for that, so runs measure fsyncs.
    while (must(*admin, {"INFO", "persistence"}).str.find("aof_rewrite_in_progress:1") != std::string::npos)
      std::this_thread::sleep_for(10ms);
  }
  ~durable_broker() {
    try {
      must(*admin, {"CONFIG", "SET", "appendfsync", appendfsync});
      must(*admin, {"CONFIG", "SET", "appendonly", appendonly});
    } catch (const std::exception&) {  // the broker is gone: nothing to restore
    }
  }
  std::unique_ptr<redis_client> admin;
  std::string appendonly = "no", appendfsync = "everysec";
};

}  // namespace

fleet_report run_fleet(const fleet_options& o, const std::function<void(const std::string&)>& progress) {
  if (o.slots == 0 || o.jobs == 0 || o.producers == 0 || o.overload_consumers == 0 || o.window == 0 || o.bulk == 0) {
    throw std::invalid_argument(
        "--slots, --jobs, --producers, --window, --bulk and --overload-consumers must be positive");
  }
  if (o.service_time <= duration::zero() || o.freshness <= duration::zero() || o.length <= duration::zero()) {
    throw std::invalid_argument("--service-time, --freshness and --duration must be positive");
  }
  broker_io b(o.broker);
  if (b.url.cluster) {
    throw std::invalid_argument("fleet measures one Redis; on a Redis Cluster: hourglass-bench cluster");
  }
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
  r.fsync_always = o.fsync_always;
  std::optional<durable_broker> durable;
  if (o.fsync_always) durable.emplace(b);
  for (const std::size_t n : o.consumers) {
    fleet_throughput t;
    t.consumers = n;
    t.raw_jobs_per_s = raw_rate(b, n, o, t.raw_calls_per_job);
    t.hourglass_jobs_per_s = hourglass_rate(b, n, o, t);
    enqueue_then_drain(b, n, o, t);
    start_latency(b, n, o.latency_rate > 0 ? o.latency_rate : t.hourglass_jobs_per_s / 2, o, t);
    char line[256];
    std::snprintf(line, sizeof line,
                  "throughput, %zu consumers: raw %.0f jobs/s, hourglass %.0f jobs/s end to end (enqueue %.0f, "
                  "bulk %.0f, drain %.0f), %.1f commands and %.1f us of Redis CPU a job",
                  n, t.raw_jobs_per_s, t.hourglass_jobs_per_s, t.enqueue_jobs_per_s, t.bulk_jobs_per_s,
                  t.drain_jobs_per_s, t.redis_calls_per_job, t.redis_cpu_us_per_job);
    progress(line);
    progress("  its commands: " + t.commands);
    r.throughput.push_back(t);
  }
  durable.reset();  // the overload runs as without persistence
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
  out << (r.fsync_always ? "appendonly yes, appendfsync always: every 202 on disk\n\n"
                         : "persistence as the broker is configured\n\n");
  out << "| consumers | raw jobs/s (pipelined XADD+XREADGROUP+XACK) | hourglass jobs/s end to end | ratio | "
         "enqueue jobs/s | bulk enqueue jobs/s | drain jobs/s | Redis commands/job (raw, hourglass) | Redis CPU "
         "us/job | enqueue-to-start p50, p99 ms (at jobs/s) |\n";
  out << "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& t : r.throughput) {
    std::snprintf(line, sizeof line,
                  "| %zu | %.0f | %.0f | %.2f | %.0f | %.0f | %.0f | %.1f, %.1f | %.1f | %.2f, %.2f (%.0f) |\n",
                  t.consumers, t.raw_jobs_per_s, t.hourglass_jobs_per_s, t.hourglass_jobs_per_s / t.raw_jobs_per_s,
                  t.enqueue_jobs_per_s, t.bulk_jobs_per_s, t.drain_jobs_per_s, t.raw_calls_per_job,
                  t.redis_calls_per_job, t.redis_cpu_us_per_job, t.latency_p50_ms, t.latency_p99_ms, t.latency_rate);
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
  j.begin_object().member("broker", r.broker).member("fsync_always", r.fsync_always);
  j.member("capacity_per_s", r.capacity_per_s);
  j.key("throughput").begin_array();
  for (const auto& t : r.throughput) {
    j.begin_object().member("consumers", static_cast<std::uint64_t>(t.consumers));
    j.member("raw_jobs_per_s", t.raw_jobs_per_s).member("hourglass_jobs_per_s", t.hourglass_jobs_per_s);
    j.member("enqueue_jobs_per_s", t.enqueue_jobs_per_s).member("bulk_jobs_per_s", t.bulk_jobs_per_s);
    j.member("drain_jobs_per_s", t.drain_jobs_per_s);
    j.member("raw_calls_per_job", t.raw_calls_per_job).member("redis_calls_per_job", t.redis_calls_per_job);
    j.member("redis_cpu_us_per_job", t.redis_cpu_us_per_job);
    j.member("commands", t.commands);
    j.member("latency_p50_ms", t.latency_p50_ms).member("latency_p99_ms", t.latency_p99_ms);
    j.member("latency_rate_per_s", t.latency_rate);
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
