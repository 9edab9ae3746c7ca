#include "hourglass/fleet/sharded_queue.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>

#include "broker_error.hpp"
#include "cluster_slots.hpp"
#include "shard_layout.hpp"

namespace hourglass::fleet {

unsigned shard_of_key(std::string_view idempotency_key, unsigned shards) noexcept {
  if (shards <= 1) return 0;
  std::uint64_t h = 14695981039346656037ULL;
  for (const char c : idempotency_key) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return static_cast<unsigned>(h % shards);
}

namespace {

// The tags of shards 1 .. shards - 1, as the queue's record in shard 0 says,
// extended (and written) when this daemon is the first with more shards.
// Before the record, a queue sharded by an earlier version has {name:i}
// shards (their streams exist from the first XGROUP CREATE): kept, so their
// jobs are still served; a queue laid out anew gets spread tags.
std::vector<std::string> shard_tags_of(redis_client& redis, job_queue& first, const std::string& name,
                                       unsigned shards) {
  const context ctx;  // each call bounded by the connection's io_timeout
  std::string record = first.shard_tags(ctx);
  for (int tries = 0; tries < 5; ++tries) {
    std::vector<std::string> tags = detail::split_tags(record);
    if (record.empty()) {
      unsigned earlier = 0;
      for (unsigned i = 1; i < 64; ++i) {
        const std::string legacy = "hg:{" + name + ":" + std::to_string(i) + "}:stream";
        const redis_reply r = redis.call(ctx, {"EXISTS", legacy});
        // An error (LOADING, CLUSTERDOWN) is no answer: taken for "none", the
        // record would leave that shard's jobs where no consumer looks.
        if (r.is_error() || !r.is_integer()) detail::broker_error("EXISTS " + legacy, r);
        if (r.integer == 1) earlier = i;
      }
      for (unsigned i = 1; i <= std::max(earlier, shards - 1) && earlier > 0; ++i) {
        tags.push_back(name + ":" + std::to_string(i));
      }
    }
    if (tags.size() + 1 > shards) {
      throw std::invalid_argument("queue " + name + " has " + std::to_string(tags.size() + 1) +
                                  " shards: --queue-shards must be at least that (shards are never taken away)");
    }
    if (tags.size() + 1 < shards) {
      std::vector<std::uint16_t> placed{detail::key_slot(name)};
      for (const std::string& t : tags) placed.push_back(detail::key_slot(t));
      for (const std::uint16_t slot : detail::spread_slots(placed, shards)) {
        tags.push_back(detail::tag_at_slot(name, static_cast<unsigned>(tags.size() + 1), slot));
      }
    }
    const std::string desired = detail::join_tags(tags);
    if (desired == record) return tags;
    const std::string now = first.exchange_shard_tags(ctx, record, desired);
    if (now == desired) return tags;
    record = now;  // another daemon wrote first: go by its record
  }
  throw redis_unavailable("redis: queue " + name + ": its record of shards kept changing");
}

}  // namespace

sharded_queue::sharded_queue(redis_client& redis, queue_options options) : options_(std::move(options)) {
  if (options_.shards < 1 || options_.shards > 64) throw std::invalid_argument("a queue has 1 to 64 shards");
  queue_options first = options_;
  first.shard = 0;
  shards_.push_back(std::make_unique<job_queue>(redis, std::move(first)));
  if (options_.shards == 1) return;
  const std::vector<std::string> tags = shard_tags_of(redis, *shards_[0], options_.name, options_.shards);
  for (unsigned i = 1; i < options_.shards; ++i) {
    queue_options o = options_;
    o.shard = i;
    o.tag = tags[i - 1];
    shards_.push_back(std::make_unique<job_queue>(redis, std::move(o)));
  }
}

std::size_t sharded_queue::index_for_new(const job_spec& job) noexcept {
  if (shards_.size() == 1) return 0;
  // A child beside its parent: its parent's cancel reaches it in one script.
  if (!job.parent.empty()) return shard_of_job(job.parent, options_.shards);
  if (!job.idempotency_key.empty()) return shard_of_key(job.idempotency_key, options_.shards);
  return turn_.fetch_add(1, std::memory_order_relaxed) % shards_.size();
}

job_queue& sharded_queue::for_new(const job_spec& job) noexcept { return *shards_[index_for_new(job)]; }

job_queue& sharded_queue::of_id(std::string_view id) noexcept { return *shards_[shard_of_job(id, options_.shards)]; }

void sharded_queue::ensure_groups(const context& ctx) {
  for (auto& s : shards_) s->ensure_group(ctx);
}

void sharded_queue::async_enqueue(const context& ctx, job_spec job, answer_fn<enqueued> done) {
  job_queue& q = for_new(job);
  q.async_enqueue(ctx, std::move(job), std::move(done));
}

void sharded_queue::async_enqueue_bulk(const context& ctx, std::vector<job_spec> jobs,
                                       std::function<void(std::vector<async_answer<enqueued>>)> done) {
  if (shards_.size() == 1) return shards_.front()->async_enqueue_bulk(ctx, std::move(jobs), std::move(done));
  // Each job's shard, then one bulk call per shard that has jobs.
  std::vector<std::vector<job_spec>> per(shards_.size());
  std::vector<std::vector<std::size_t>> where(shards_.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const std::size_t s = index_for_new(jobs[i]);
    where[s].push_back(i);
    per[s].push_back(std::move(jobs[i]));
  }
  struct all {
    std::mutex mu;
    std::vector<async_answer<enqueued>> answers;
    std::size_t left = 0;
    std::function<void(std::vector<async_answer<enqueued>>)> done;
  };
  auto a = std::make_shared<all>();
  a->answers.resize(jobs.size());
  a->done = std::move(done);
  for (const auto& w : where) a->left += w.empty() ? 0 : 1;
  if (a->left == 0) return a->done({});
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    if (where[s].empty()) continue;
    shards_[s]->async_enqueue_bulk(ctx, std::move(per[s]),
                                   [a, at = std::move(where[s])](std::vector<async_answer<enqueued>> got) {
                                     std::unique_lock lock(a->mu);
                                     for (std::size_t k = 0; k < at.size() && k < got.size(); ++k)
                                       a->answers[at[k]] = std::move(got[k]);
                                     if (--a->left != 0) return;
                                     lock.unlock();
                                     a->done(std::move(a->answers));
                                   });
  }
}

void sharded_queue::async_find(const context& ctx, std::string id, answer_fn<std::optional<fleet_job>> done) {
  job_queue& q = of_id(id);
  if (&q == shards_.front().get()) return q.async_find(ctx, std::move(id), std::move(done));
  // Not there: perhaps an id from before the queue was sharded.
  q.async_find(ctx, id, [this, ctx, id, done = std::move(done)](async_answer<std::optional<fleet_job>> a) mutable {
    if (a.error || a.value) return done(std::move(a));
    shards_.front()->async_find(ctx, std::move(id), std::move(done));
  });
}

void sharded_queue::async_cancel(const context& ctx, std::string id, answer_fn<cancelled_job> done,
                                 cancel_cause cause) {
  job_queue& q = of_id(id);
  if (&q == shards_.front().get()) return q.async_cancel(ctx, std::move(id), std::move(done), cause);
  q.async_cancel(
      ctx, id,
      [this, ctx, id, cause, done = std::move(done)](async_answer<cancelled_job> a) mutable {
        if (a.error || a.value.job) return done(std::move(a));
        shards_.front()->async_cancel(ctx, std::move(id), std::move(done), cause);
      },
      cause);
}

void sharded_queue::async_signal(const context& ctx, std::string id, std::string name, std::string payload,
                                 answer_fn<signal_answer> done) {
  job_queue& q = of_id(id);
  q.async_signal(ctx, std::move(id), std::move(name), std::move(payload), std::move(done));
}

void sharded_queue::async_replay(const context& ctx, std::string id, duration freshness, duration min_budget,
                                 bool admission, answer_fn<dead_answer> done) {
  job_queue& q = of_id(id);
  if (&q == shards_.front().get()) {
    return q.async_replay(ctx, std::move(id), freshness, min_budget, admission, std::move(done));
  }
  q.async_replay(
      ctx, id, freshness, min_budget, admission,
      [this, ctx, id, freshness, min_budget, admission, done = std::move(done)](async_answer<dead_answer> a) mutable {
        if (a.error || a.value.verdict != dead_answer::kind::unknown) return done(std::move(a));
        shards_.front()->async_replay(ctx, std::move(id), freshness, min_budget, admission, std::move(done));
      });
}

void sharded_queue::async_delete_dead(const context& ctx, std::string id, answer_fn<dead_answer> done) {
  job_queue& q = of_id(id);
  if (&q == shards_.front().get()) return q.async_delete_dead(ctx, std::move(id), std::move(done));
  q.async_delete_dead(ctx, id, [this, ctx, id, done = std::move(done)](async_answer<dead_answer> a) mutable {
    if (a.error || a.value.verdict != dead_answer::kind::unknown) return done(std::move(a));
    shards_.front()->async_delete_dead(ctx, std::move(id), std::move(done));
  });
}

void sharded_queue::async_list(const context& ctx, list_query q, answer_fn<job_list> done) {
  if (shards_.size() == 1) return shards_.front()->async_list(ctx, std::move(q), std::move(done));
  std::size_t s = 0;
  if (!q.cursor.empty()) {
    const auto slash = q.cursor.find('/');
    std::size_t n = 0;
    bool digits = slash != std::string::npos && slash > 0 && slash <= 2;
    for (std::size_t i = 0; digits && i < slash; ++i) {
      if (q.cursor[i] < '0' || q.cursor[i] > '9') digits = false;
      n = n * 10 + static_cast<std::size_t>(q.cursor[i] - '0');
    }
    if (!digits || n >= shards_.size()) return done({job_list{{}, "", true}, nullptr});
    s = n;
    q.cursor = q.cursor.substr(slash + 1);
  }
  shards_[s]->async_list(ctx, q, [this, s, done = std::move(done)](async_answer<job_list> a) {
    if (a.error || a.value.invalid_cursor) return done(std::move(a));
    // This shard's walk goes on, or the next shard's begins: never "" before the last.
    if (!a.value.next_cursor.empty()) {
      a.value.next_cursor = std::to_string(s) + "/" + a.value.next_cursor;
    } else if (s + 1 < shards_.size()) {
      a.value.next_cursor = std::to_string(s + 1) + "/";
    }
    done(std::move(a));
  });
}

void sharded_queue::async_queue_states(const context& ctx, queue_op op, answer_fn<std::vector<queue_state>> done) {
  struct all {
    std::mutex mu;
    std::vector<queue_state> states;
    std::exception_ptr error;
    std::size_t left = 0;
    answer_fn<std::vector<queue_state>> done;
  };
  auto a = std::make_shared<all>();
  a->states.resize(shards_.size());
  a->left = shards_.size();
  a->done = std::move(done);
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    shards_[s]->async_queue_state(ctx, op, [a, s](async_answer<queue_state> got) {
      std::unique_lock lock(a->mu);
      if (got.error) {
        if (!a->error) a->error = got.error;
      } else {
        a->states[s] = std::move(got.value);
      }
      if (--a->left != 0) return;
      lock.unlock();
      if (a->error) return a->done({{}, a->error});
      a->done({std::move(a->states), nullptr});
    });
  }
}

void sharded_queue::async_purge_dead(const context& ctx, std::size_t count, answer_fn<job_queue::purged> done) {
  purge_from(ctx, 0, count, {}, std::move(done));
}

// One shard after another until `count` are purged; then what is left everywhere.
void sharded_queue::purge_from(const context& ctx, std::size_t shard, std::size_t count, job_queue::purged sum,
                               answer_fn<job_queue::purged> done) {
  if (count == 0 || shard == shards_.size()) {
    return async_queue_states(ctx, queue_op::look,
                              [sum, done = std::move(done)](async_answer<std::vector<queue_state>> s) mutable {
                                if (s.error) return done({{}, s.error});
                                sum.left = 0;
                                for (const queue_state& q : s.value) sum.left += q.dead_letters;
                                done({sum, nullptr});
                              });
  }
  shards_[shard]->async_purge_dead(
      ctx, count, [this, ctx, shard, count, sum, done = std::move(done)](async_answer<job_queue::purged> a) mutable {
        if (a.error) return done({{}, a.error});
        sum.jobs += a.value.jobs;
        sum.entries += a.value.entries;
        purge_from(ctx, shard + 1, count - std::min<std::size_t>(count, a.value.entries), sum, std::move(done));
      });
}

queue_state merge_states(std::vector<queue_state> shards) {
  if (shards.empty()) return {};
  if (shards.size() == 1) return std::move(shards.front());
  queue_state out;
  const std::int64_t base_ms = shards.front().broker_now_us / 1000;
  out.broker_now_us = shards.front().broker_now_us;
  std::int64_t longest_wait_ms = -1;
  std::map<std::string, std::size_t> consumer_at;  // index in out.consumers: first seen first
  std::map<std::string, std::uint64_t> totals;
  std::vector<std::string> total_order;
  duration mean_sum{};
  for (const queue_state& s : shards) {
    const std::int64_t now_ms = s.broker_now_us / 1000;
    const auto onto_base = [&](std::int64_t ms) { return ms - now_ms + base_ms; };
    out.length += s.length;
    out.pending += s.pending;
    out.scheduled += s.scheduled;
    out.dead_letters += s.dead_letters;
    out.retrying += s.retrying;
    out.waiting += s.waiting;
    out.retrying_exact = out.retrying_exact && s.retrying_exact;
    mean_sum += s.mean_run;
    if (!s.oldest_waiting.empty()) {
      const std::int64_t added_ms = std::strtoll(s.oldest_waiting.c_str(), nullptr, 10);
      const std::int64_t waited = now_ms - added_ms;
      if (waited > longest_wait_ms) {
        longest_wait_ms = waited;
        out.oldest_waiting = std::to_string(base_ms - waited) + "-0";
      }
    }
    if (s.paused_since_ms) {
      const std::int64_t since = onto_base(*s.paused_since_ms);
      out.paused_since_ms = out.paused_since_ms ? std::min(*out.paused_since_ms, since) : since;
    }
    for (const queue_state::consumer& c : s.consumers) {
      const auto [at, fresh] = consumer_at.try_emplace(c.name, out.consumers.size());
      if (fresh) out.consumers.push_back({c.name, 0, std::nullopt, 0});
      queue_state::consumer& m = out.consumers[at->second];
      m.slots += c.slots;
      m.held += c.held;
      if (c.lease_expiry_ms) {
        const std::int64_t expiry = onto_base(*c.lease_expiry_ms);
        m.lease_expiry_ms = m.lease_expiry_ms ? std::min(*m.lease_expiry_ms, expiry) : expiry;
      }
    }
    for (const auto& [name, n] : s.totals) {
      if (totals.count(name) == 0) total_order.push_back(name);
      totals[name] += n;
    }
  }
  out.mean_run = mean_sum / static_cast<std::int64_t>(shards.size());
  for (const std::string& name : total_order) out.totals.emplace_back(name, totals[name]);
  return out;
}

}  // namespace hourglass::fleet
