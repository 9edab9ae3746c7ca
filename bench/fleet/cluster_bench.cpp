#include "fleet/cluster_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>

#include "fleet/broker_cost.hpp"
#include "fleet/fleet_parts.hpp"
#include "hourglass/fleet/sharded_consumer.hpp"
#include "hourglass/support/json.hpp"

namespace hourglass::bench {

namespace {

using fleet_parts::broker_io;

// Who serves which slot, as CLUSTER SLOTS says: [start, end] -> master.
struct cluster_layout {
  struct range {
    long long start = 0, end = 0;
    std::size_t master = 0;
  };
  std::vector<fleet::redis_endpoint> masters;
  std::vector<range> ranges;

  std::size_t master_of(long long slot) const {
    for (const range& r : ranges) {
      if (slot >= r.start && slot <= r.end) return r.master;
    }
    throw std::runtime_error("no master serves slot " + std::to_string(slot));
  }
};

cluster_layout read_layout(fleet::redis_client& seed) {
  const fleet::redis_reply slots = must(seed, {"CLUSTER", "SLOTS"});
  cluster_layout l;
  for (const fleet::redis_reply& r : slots.elements) {
    const fleet::redis_reply& m = r.elements.at(2);
    const fleet::redis_endpoint e{m.elements.at(0).str, static_cast<std::uint16_t>(m.elements.at(1).integer), 0, ""};
    std::size_t index = l.masters.size();
    for (std::size_t i = 0; i < l.masters.size(); ++i) {
      if (l.masters[i].host == e.host && l.masters[i].port == e.port) index = i;
    }
    if (index == l.masters.size()) l.masters.push_back(e);
    l.ranges.push_back({r.elements.at(0).integer, r.elements.at(1).integer, index});
  }
  if (l.masters.empty()) throw std::runtime_error("the cluster serves no slot");
  return l;
}

std::string address(const fleet::redis_endpoint& e) { return e.host + ":" + std::to_string(e.port); }

// Each master's load over one run: INFO commandstats and cpu before and after.
struct master_loads {
  master_loads(broker_io& b, const cluster_layout& layout) {
    for (const fleet::redis_endpoint& m : layout.masters) {
      admins.push_back(b.node(m));
      costs.push_back(std::make_unique<broker_cost>(*admins.back()));
    }
  }
  // `per_master`: how many of the run's queues (or shards) each master has;
  // `jobs_each`: the jobs each of them carried.
  void report(cluster_run& run, const cluster_layout& layout, std::map<std::size_t, std::size_t>& per_master,
              std::uint64_t jobs_each, double elapsed) {
    for (std::size_t m = 0; m < layout.masters.size(); ++m) {
      cluster_node_load n;
      n.node = address(layout.masters[m]);
      n.queues = per_master.count(m) != 0 ? per_master[m] : 0;
      n.commands_per_s = costs[m]->calls_per(1) / elapsed;
      const double cpu_us = costs[m]->cpu_us_per(1);
      n.cpu_cores = cpu_us / 1e6 / elapsed;
      if (n.queues > 0) n.cpu_us_per_job = cpu_us / static_cast<double>(jobs_each * n.queues);
      run.nodes.push_back(n);
    }
  }
  std::vector<std::unique_ptr<fleet::redis_connection>> admins;
  std::vector<std::unique_ptr<broker_cost>> costs;
};

// One daemon's worth serving every shard of a queue.
struct sharded_member {
  sharded_member(broker_io& b, const std::string& queue_name, std::size_t shards, const std::string& name,
                 std::size_t slots)
      : jobs(executor_options{.workers = slots}),
        commands(b.connect()),
        queue(*commands, {.name = queue_name,
                          .result_ttl = std::chrono::seconds(60),
                          .idempotency_ttl = std::chrono::seconds(60),
                          .shards = static_cast<unsigned>(shards)}),
        consumer(queue, readers(b, shards), jobs, fleet_parts::noop,
                 {.name = name, .slots = slots, .lease = std::chrono::seconds(5)}) {}
  static std::vector<std::unique_ptr<fleet::redis_client>> readers(broker_io& b, std::size_t n) {
    std::vector<std::unique_ptr<fleet::redis_client>> each;
    for (std::size_t i = 0; i < n; ++i) each.push_back(b.connect());
    return each;
  }
  executor jobs;
  std::unique_ptr<fleet::redis_client> commands;
  fleet::sharded_queue queue;
  fleet::sharded_consumer consumer;
};

// A queue name whose K shards land on as many masters as there are (of K).
std::string sharded_name(fleet::redis_client& commands, fleet::redis_client& seed, const cluster_layout& layout,
                         std::size_t k, std::map<std::size_t, std::size_t>& per_master) {
  const std::size_t want = std::min(k, layout.masters.size());
  for (int i = 0; i < 100000; ++i) {
    const std::string name = fleet_parts::unique("sh" + std::to_string(k) + "-" + std::to_string(i));
    fleet::sharded_queue q(commands, {.name = name, .shards = static_cast<unsigned>(k)});
    std::map<std::size_t, std::size_t> on;
    for (std::size_t s = 0; s < k; ++s) {
      ++on[layout.master_of(must(seed, {"CLUSTER", "KEYSLOT", q.shard(s).key("stream")}).integer)];
    }
    std::size_t most = 0;
    for (const auto& [m, n] : on) most = std::max(most, n);
    if (on.size() == want && most <= (k + want - 1) / want) {
      per_master = std::move(on);
      return name;
    }
  }
  throw std::runtime_error("no queue name puts " + std::to_string(k) + " shards on " + std::to_string(want) +
                           " masters");
}

// One queue over K shards, the work of K queues (cluster_bench.hpp).
cluster_run run_sharded(const cluster_options& o, broker_io& b, fleet::redis_client& seed,
                        fleet::redis_client& commands, const cluster_layout& layout, std::size_t k) {
  std::map<std::size_t, std::size_t> per_master;
  const std::string name = sharded_name(commands, seed, layout, k, per_master);
  master_loads loads(b, layout);
  std::vector<std::unique_ptr<sharded_member>> fleet;
  for (std::size_t i = 0; i < o.consumers; ++i) {
    fleet.push_back(std::make_unique<sharded_member>(b, name, k, "c" + std::to_string(i), o.slots * k));
    fleet.back()->consumer.start(context());
  }
  const std::uint64_t jobs = o.jobs * k;
  const auto t0 = fleet_parts::steady::now();
  std::vector<std::thread> producers;
  for (std::size_t p = 0; p < o.producers * k; ++p) {
    producers.emplace_back([&, p] {
      auto c = b.connect();
      fleet::sharded_queue q(*c, {.name = name,
                                  .result_ttl = std::chrono::seconds(60),
                                  .idempotency_ttl = std::chrono::seconds(60),
                                  .shards = static_cast<unsigned>(k)});
      fleet_parts::windowed(p, jobs, o.producers * k, o.window, [&](std::uint64_t, std::function<void()> done) {
        q.async_enqueue(context(), {.handler = "noop"},
                        [done = std::move(done)](fleet::async_answer<fleet::enqueued>) { done(); });
      });
    });
  }
  for (auto& t : producers) t.join();
  const auto written = [&] {
    std::uint64_t n = 0;
    for (const auto& m : fleet) n += m->consumer.stats().outcomes_written;
    return n;
  };
  while (written() < jobs) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double elapsed = fleet_parts::seconds(fleet_parts::steady::now() - t0);

  cluster_run run;
  run.queues = 1;
  run.shards = k;
  run.masters_used = per_master.size();
  run.jobs_per_s = static_cast<double>(jobs) / elapsed;
  loads.report(run, layout, per_master, o.jobs, elapsed);
  for (auto& m : fleet) m->consumer.stop();
  fleet::sharded_queue q(commands, {.name = name, .shards = static_cast<unsigned>(k)});
  for (std::size_t s = 0; s < k; ++s) fleet_parts::drop_queue(commands, q.shard(s).options().name);
  return run;
}

}  // namespace

cluster_report run_cluster(const cluster_options& o, const std::function<void(const std::string&)>& progress) {
  if (o.slots == 0 || o.jobs == 0 || o.producers == 0 || o.window == 0 || o.consumers == 0 || o.queues.empty()) {
    throw std::invalid_argument("--queues, --consumers, --slots, --jobs, --producers and --window must be positive");
  }
  broker_io b(o.broker);
  if (!b.url.cluster) throw std::invalid_argument("--broker must be redis+cluster://HOST:PORT[,...]");
  auto seed = b.node(b.seeds.front());
  cluster_layout layout;
  try {
    layout = read_layout(*seed);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot use the cluster " + o.broker + ": " + e.what());
  }
  cluster_report report;
  report.broker = o.broker;
  report.masters = layout.masters.size();
  auto commands = b.connect();
  for (const std::size_t k : o.shards) {
    if (k == 0 || k > 64) throw std::invalid_argument("--shards counts must be 1 to 64");
    cluster_run run = run_sharded(o, b, *seed, *commands, layout, k);
    char line[160];
    std::snprintf(line, sizeof line, "cluster, one queue over %zu shards on %zu masters: %.0f jobs/s end to end", k,
                  run.masters_used, run.jobs_per_s);
    progress(line);
    report.runs.push_back(std::move(run));
  }
  for (const std::size_t k : o.shards.empty() ? o.queues : std::vector<std::size_t>{}) {
    if (k == 0) throw std::invalid_argument("--queues counts must be positive");
    // K queues, spread over the masters: a new master for each while there is one.
    std::vector<std::string> names;
    std::vector<std::size_t> on(k);
    std::map<std::size_t, std::size_t> per_master;
    for (int i = 0; names.size() < k; ++i) {
      const std::string name = fleet_parts::unique("cl" + std::to_string(k) + "-" + std::to_string(i));
      const long long slot = must(*seed, {"CLUSTER", "KEYSLOT", "hg:{" + name + "}:stream"}).integer;
      const std::size_t m = layout.master_of(slot);
      const bool all_used = per_master.size() == layout.masters.size();
      if (per_master.count(m) != 0 && !all_used) continue;
      if (all_used && per_master[m] > names.size() / layout.masters.size()) continue;
      on[names.size()] = m;
      ++per_master[m];
      names.push_back(name);
    }
    master_loads loads(b, layout);
    std::vector<fleet_parts::fleet_members> fleets;
    fleets.reserve(names.size());
    for (const std::string& name : names) {
      fleets.push_back(fleet_parts::start_fleet(b, name, o.consumers, o.slots, 0, fleet_parts::noop));
    }
    const auto t0 = fleet_parts::steady::now();
    std::vector<std::thread> producers;
    producers.reserve(names.size());
    for (const std::string& name : names) {
      producers.emplace_back([&, name] { fleet_parts::produce(b, name, o.jobs, o.producers, o.window, 1); });
    }
    for (auto& t : producers) t.join();
    for (const auto& f : fleets) fleet_parts::wait_written(f, o.jobs);
    const double elapsed = fleet_parts::seconds(fleet_parts::steady::now() - t0);

    cluster_run run;
    run.queues = k;
    run.masters_used = per_master.size();
    run.jobs_per_s = static_cast<double>(o.jobs * k) / elapsed;
    loads.report(run, layout, per_master, o.jobs, elapsed);
    for (auto& f : fleets) fleet_parts::stop_fleet(f);
    for (const std::string& name : names) fleet_parts::drop_queue(*commands, name);
    char line[160];
    std::snprintf(line, sizeof line, "cluster, %zu queues on %zu masters: %.0f jobs/s end to end", k, run.masters_used,
                  run.jobs_per_s);
    progress(line);
    report.runs.push_back(std::move(run));
  }
  return report;
}

void print_table(std::ostream& out, const cluster_report& r) {
  out << "broker " << r.broker << " (" << r.masters << " masters)\n\n";
  out << "| queues | shards each | masters used | jobs/s end to end | per master: queues (or shards), commands/s, CPU "
         "cores, CPU us/job |\n";
  out << "|---|---|---|---|---|\n";
  char line[256];
  for (const cluster_run& run : r.runs) {
    std::string nodes;
    for (const cluster_node_load& n : run.nodes) {
      std::snprintf(line, sizeof line, "%s%s: %zu, %.0f, %.2f, %.1f", nodes.empty() ? "" : "; ", n.node.c_str(),
                    n.queues, n.commands_per_s, n.cpu_cores, n.cpu_us_per_job);
      nodes += line;
    }
    std::snprintf(line, sizeof line, "| %zu | %zu | %zu | %.0f | ", run.queues, run.shards, run.masters_used,
                  run.jobs_per_s);
    out << line << nodes << " |\n";
  }
}

std::string to_json(const cluster_report& r) {
  support::json_writer j;
  j.begin_object().member("broker", r.broker).member("masters", static_cast<std::uint64_t>(r.masters));
  j.key("runs").begin_array();
  for (const cluster_run& run : r.runs) {
    j.begin_object().member("queues", static_cast<std::uint64_t>(run.queues));
    j.member("shards", static_cast<std::uint64_t>(run.shards));
    j.member("masters_used", static_cast<std::uint64_t>(run.masters_used)).member("jobs_per_s", run.jobs_per_s);
    j.key("nodes").begin_array();
    for (const cluster_node_load& n : run.nodes) {
      j.begin_object().member("node", n.node).member("queues", static_cast<std::uint64_t>(n.queues));
      j.member("commands_per_s", n.commands_per_s).member("cpu_cores", n.cpu_cores);
      j.member("cpu_us_per_job", n.cpu_us_per_job).end_object();
    }
    j.end_array().end_object();
  }
  return j.end_array().end_object().take();
}

}  // namespace hourglass::bench
