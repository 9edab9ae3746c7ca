#include "fleet/fleet_parts.hpp"

#include <unistd.h>

#include <algorithm>
#include <semaphore>
#include <stdexcept>

#include "fleet/broker_cost.hpp"
#include "hourglass/fleet/redis_cluster.hpp"

namespace hourglass::bench::fleet_parts {

using namespace std::chrono_literals;

broker_io::broker_io(const std::string& u) : url(support::parse_broker_url(u, "--broker")) {
  for (const support::redis_url& n : url.nodes) seeds.push_back({n.host, n.port, n.db, ""});
  for (int i = 0; i < 2; ++i) threads.emplace_back([this] { io.run(); });
}

broker_io::~broker_io() {
  work.reset();
  io.stop();
  for (auto& t : threads) t.join();
}

std::unique_ptr<fleet::redis_client> broker_io::connect() { return fleet::connect_broker(io, url.cluster, seeds); }

std::unique_ptr<fleet::redis_connection> broker_io::node(const fleet::redis_endpoint& endpoint) {
  return std::make_unique<fleet::redis_connection>(io, endpoint);
}

double seconds(steady::duration d) { return std::chrono::duration<double>(d).count(); }

std::string unique(const std::string& what) { return "bench-" + what + "-" + std::to_string(::getpid()); }

void drop_queue(fleet::redis_client& c, const std::string& name) {
  // Every key of the queue, job hashes included (jobs never run have no TTL):
  // left behind, they grow the keyspace the next runs measure in.
  const std::string prefix = "hg:{" + name + "}:";
  std::string cursor = "0";
  do {
    // routed to the queue's node on a cluster (its keys share one hash tag)
    const fleet::redis_reply page = c.call(context(), {"SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"}, false,
                                           prefix + "stream");
    if (!page.is_array() || page.elements.size() != 2) throw std::runtime_error("redis: SCAN: " + page.str);
    cursor = page.elements[0].str;
    std::vector<std::string> unlink{"UNLINK"};
    for (const fleet::redis_reply& k : page.elements[1].elements) unlink.push_back(k.str);
    if (unlink.size() > 1) must(c, std::move(unlink));
  } while (cursor != "0");
}

void windowed(std::uint64_t first, std::uint64_t n, std::uint64_t step, std::size_t window,
              const std::function<void(std::uint64_t, std::function<void()>)>& send) {
  std::counting_semaphore<> room(static_cast<std::ptrdiff_t>(window));
  for (std::uint64_t i = first; i < n; i += step) {
    room.acquire();
    send(i, [&room] { room.release(); });
  }
  for (std::size_t i = 0; i < window; ++i) room.acquire();
}

member::member(broker_io& b, const std::string& queue_name, const std::string& name, std::size_t slots,
               std::size_t prefetch, fleet::job_runner runner)
    : jobs(executor_options{.workers = slots}),
      commands(b.connect()),
      reader(b.connect()),
      queue(*commands, {.name = queue_name, .result_ttl = 60s, .idempotency_ttl = 60s}),
      consumer(queue, *reader, jobs, std::move(runner),
               {.name = name, .slots = slots, .prefetch = prefetch, .lease = 5s}) {}

fleet_members start_fleet(broker_io& b, const std::string& name, std::size_t consumers, std::size_t slots,
                          std::size_t prefetch, const fleet::job_runner& runner) {
  fleet_members fleet;
  for (std::size_t i = 0; i < consumers; ++i) {
    fleet.push_back(std::make_unique<member>(b, name, "c" + std::to_string(i), slots, prefetch, runner));
    fleet.back()->consumer.start(context());
  }
  return fleet;
}

std::uint64_t written(const fleet_members& fleet) {
  std::uint64_t n = 0;
  for (const auto& m : fleet) n += m->consumer.stats().outcomes_written;
  return n;
}

void wait_written(const fleet_members& fleet, std::uint64_t n) {
  while (written(fleet) < n) std::this_thread::sleep_for(1ms);
}

void stop_fleet(fleet_members& fleet) {
  for (auto& m : fleet) m->consumer.stop();
  fleet.clear();
}

void produce(broker_io& b, const std::string& name, std::uint64_t jobs, std::size_t producers, std::size_t window,
             std::size_t bulk) {
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      auto c = b.connect();
      fleet::job_queue q(*c, {.name = name, .result_ttl = 60s, .idempotency_ttl = 60s});
      if (bulk <= 1) {
        windowed(p, jobs, producers, window, [&](std::uint64_t, std::function<void()> done) {
          q.async_enqueue(context(), {.handler = "noop"},
                          [done = std::move(done)](fleet::async_answer<fleet::enqueued>) { done(); });
        });
        return;
      }
      const std::uint64_t chunks = (jobs + bulk - 1) / bulk;
      windowed(p, chunks, producers, std::max<std::size_t>(1, window / bulk),
               [&](std::uint64_t chunk, std::function<void()> done) {
                 const std::uint64_t n = std::min<std::uint64_t>(bulk, jobs - chunk * bulk);
                 q.async_enqueue_bulk(context(), std::vector<fleet::job_spec>(n, fleet::job_spec{.handler = "noop"}),
                                      [done = std::move(done)](auto) { done(); });
               });
    });
  }
  for (auto& t : threads) t.join();
}

const fleet::job_runner noop{.run = [](const context&, const fleet::delivered_job&) { return fleet::job_output{}; }};

}  // namespace hourglass::bench::fleet_parts
