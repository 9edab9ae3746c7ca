// A process's consumers of a sharded queue, its slots shared among the
// shards by their demand (sharded_consumer.hpp).
#include "hourglass/fleet/sharded_consumer.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "hourglass/fleet/lease.hpp"

namespace hourglass::fleet {

std::vector<std::size_t> share_by_demand(std::size_t total, const std::vector<std::int64_t>& demand,
                                         std::size_t floor) {
  const std::size_t n = demand.size();
  std::vector<std::size_t> out(n, 0);
  if (n == 0) return out;
  std::size_t left = total;
  for (std::size_t& s : out) {
    s = std::min(floor, left);
    left -= s;
  }
  // Capped so that left * demand cannot overflow: shares of ~4 billion
  // waiting jobs are as good as exact.
  constexpr std::int64_t most = std::int64_t{1} << 32;
  std::vector<std::uint64_t> d(n);
  for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<std::uint64_t>(std::clamp<std::int64_t>(demand[i], 0, most));
  const std::uint64_t sum = std::accumulate(d.begin(), d.end(), std::uint64_t{0});
  if (sum == 0) {
    for (std::size_t i = 0; i < n; ++i) out[i] += left / n + (i < left % n ? 1 : 0);
    return out;
  }
  std::vector<std::uint64_t> remainder(n);
  std::size_t given = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t part = left * d[i];
    out[i] += static_cast<std::size_t>(part / sum);
    given += static_cast<std::size_t>(part / sum);
    remainder[i] = part % sum;
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return remainder[a] > remainder[b]; });
  for (std::size_t k = 0; given < left; ++k, ++given) ++out[order[k]];
  return out;
}

sharded_consumer::sharded_consumer(sharded_queue& queue, std::vector<std::unique_ptr<redis_client>> readers,
                                   executor& jobs, job_runner runner, consumer_options options)
    : readers_(std::move(readers)), clk_(jobs.get_clock()), options_(std::move(options)) {
  if (readers_.size() != queue.size()) throw std::invalid_argument("sharded consumer: one reader per shard");
  // Evenly until the first renewals have read each shard's demand.
  const std::vector<std::int64_t> none(queue.size(), 0);
  slots_ = share_by_demand(std::max(options_.slots, queue.size()), none, 1);
  const std::vector<std::size_t> prefetch = share_by_demand(options_.prefetch, none, 0);
  for (std::size_t i = 0; i < queue.size(); ++i) {
    consumer_options o = options_;
    o.slots = slots_[i];
    o.prefetch = prefetch[i];
    shards_.push_back(std::make_unique<consumer>(queue.shard(i), *readers_[i], jobs, runner, std::move(o)));
  }
}

sharded_consumer::~sharded_consumer() { stop(); }

void sharded_consumer::start(const context& ctx) {
  for (auto& c : shards_) c->start(ctx);
  if (shards_.size() > 1) sharer_ = std::thread([this] { share_loop(); });
}

void sharded_consumer::drain(time_point deadline) {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    stopping_.notify_all();
  }
  if (sharer_.joinable()) sharer_.join();
  std::vector<std::thread> draining;
  for (std::size_t i = 1; i < shards_.size(); ++i) {
    draining.emplace_back([&c = *shards_[i], deadline] { c.drain(deadline); });
  }
  shards_.front()->drain(deadline);
  for (auto& t : draining) t.join();
}

void sharded_consumer::stop() { drain(clk_.now()); }

consumer_stats sharded_consumer::stats() const { return sum_of(shard_stats()); }

std::vector<consumer_stats> sharded_consumer::shard_stats() const {
  std::vector<consumer_stats> all;
  all.reserve(shards_.size());
  for (const auto& c : shards_) all.push_back(c->stats());
  return all;
}

std::vector<std::size_t> sharded_consumer::slots() const {
  std::lock_guard lock(mu_);
  return slots_;
}

void sharded_consumer::share_now() {
  std::vector<std::int64_t> demand;
  for (const consumer_stats& s : shard_stats()) demand.push_back(s.backlog + s.pending);
  const std::vector<std::size_t> slots = share_by_demand(std::max(options_.slots, shards_.size()), demand, 1);
  const std::vector<std::size_t> prefetch = share_by_demand(options_.prefetch, demand, 0);
  for (std::size_t i = 0; i < shards_.size(); ++i) shards_[i]->set_slots(slots[i], prefetch[i]);
  std::lock_guard lock(mu_);
  slots_ = slots;
}

// Every renewal period, on the executor's clock, until a drain.
void sharded_consumer::share_loop() {
  const duration every = lease_timing_for(options_.lease).renew_every;
  std::unique_lock lock(mu_);
  while (!stop_) {
    clk_.wait_until(lock, stopping_, clk_.now() + every, [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    share_now();
    lock.lock();
  }
}

}  // namespace hourglass::fleet
