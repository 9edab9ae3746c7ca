// The process-local async job store (make_memory_store).
#include <cstdio>
#include <deque>
#include <mutex>
#include <random>
#include <unordered_map>
#include <utility>

#include "async_store.hpp"

namespace hourglass::server::detail {

namespace {

// circuit_open is the outcome of a job that ran (a call it made was refused), not a refusal.
bool refused_at_admission(const status& st) {
  return (st.code == outcome::rejected && st.reason != reject_reason::circuit_open) ||
         (st.code == outcome::deadline_exceeded && st.stage == expiry_stage::admission);
}

class memory_async_store final : public async_store {
 public:
  memory_async_store(std::size_t max_jobs, duration ttl) : max_jobs_(max_jobs), ttl_(ttl) {}

  std::optional<std::string> create(std::string_view handler, time_point now) override {
    std::lock_guard lock(mu_);
    purge_locked(now);
    if (jobs_.size() >= max_jobs_ && !evict_one_locked()) return std::nullopt;
    std::string id;
    do {
      id = new_id_locked();
    } while (jobs_.count(id) != 0);
    entry& e = jobs_[id];
    e.rec.id = id;
    e.rec.handler = std::string(handler);
    e.rec.created = now;
    return id;
  }

  after_submit submitted(const std::string& id, job_ref ref) override {
    std::lock_guard lock(mu_);
    after_submit next;
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) return next;
    entry& e = it->second;
    if (e.rec.state == async_state::finished && refused_at_admission(e.rec.st)) {
      next.refused = e.rec.st;  // nothing ran and nothing will: no job to poll
      jobs_.erase(it);
      return next;
    }
    e.ref = std::move(ref);
    e.submitted = true;
    next.cancel_now = e.rec.cancel_requested && e.rec.state != async_state::finished;
    return next;
  }

  void started(const std::string& id) override {
    std::lock_guard lock(mu_);
    const auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.rec.state == async_state::queued) it->second.rec.state = async_state::running;
  }

  void finish(const std::string& id, async_outcome o, time_point now) override {
    std::lock_guard lock(mu_);
    const auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.rec.state == async_state::finished) return;
    async_record& r = it->second.rec;
    r.state = async_state::finished;
    r.st = o.st;
    r.timings = o.timings;
    r.finished_at = now;
    r.result = std::move(o.result);
    r.error_http = o.error_http;
    r.error_code = std::move(o.error_code);
    r.error_message = std::move(o.error_message);
    finished_.emplace_back(now, id);
  }

  std::optional<async_record> cancel(const std::string& id, time_point now) override {
    job_ref ref;
    {
      std::lock_guard lock(mu_);
      purge_locked(now);
      const auto it = jobs_.find(id);
      if (it == jobs_.end()) return std::nullopt;
      entry& e = it->second;
      if (e.rec.state == async_state::finished) return e.rec;
      e.rec.cancel_requested = true;
      if (!e.submitted) return e.rec;  // submitted() cancels it
      ref = e.ref;
    }
    ref.cancel(cancel_cause::requested);  // unlocked: a queued job finishes right here, through finish()
    return find(id, now);
  }

  std::optional<async_record> find(const std::string& id, time_point now) override {
    std::lock_guard lock(mu_);
    purge_locked(now);
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    return it->second.rec;
  }

  std::size_t size() const override {
    std::lock_guard lock(mu_);
    return jobs_.size();
  }

 private:
  struct entry {
    async_record rec;
    job_ref ref;  // set once submitted
    bool submitted = false;
  };

  void purge_locked(time_point now) {
    while (!finished_.empty() && saturating_add(finished_.front().first, ttl_) <= now) {
      jobs_.erase(finished_.front().second);
      finished_.pop_front();
    }
  }

  // Drops the oldest finished job still stored.
  bool evict_one_locked() {
    while (!finished_.empty()) {
      const auto erased = jobs_.erase(finished_.front().second);
      finished_.pop_front();
      if (erased != 0) return true;
    }
    return false;
  }

  // 128 bits from the OS's generator: ids are not guessable from one another.
  std::string new_id_locked() {
    char buf[33];
    for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", static_cast<unsigned>(rng_()));
    return buf;
  }

  const std::size_t max_jobs_;
  const duration ttl_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, entry> jobs_;
  std::deque<std::pair<time_point, std::string>> finished_;  // in finishing order
  std::random_device rng_;
};

}  // namespace

std::unique_ptr<async_store> make_memory_store(std::size_t max_jobs, duration ttl) {
  return std::make_unique<memory_async_store>(max_jobs, ttl);
}

}  // namespace hourglass::server::detail
