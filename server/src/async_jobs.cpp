#include "async_jobs.hpp"

#include <cstdio>

namespace hourglass::server::detail {

std::string async_store::new_id_locked() {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng_()),
                static_cast<unsigned long long>(rng_()));
  return buf;
}

void async_store::purge_locked(time_point now) {
  while (!finished_.empty() && saturating_add(finished_.front().first, ttl_) <= now) {
    jobs_.erase(finished_.front().second);
    finished_.pop_front();
  }
}

bool async_store::evict_one_locked() {
  while (!finished_.empty()) {
    const auto erased = jobs_.erase(finished_.front().second);
    finished_.pop_front();
    if (erased != 0) return true;
  }
  return false;
}

std::shared_ptr<async_job> async_store::create(std::string handler, time_point now) {
  std::lock_guard lock(mu_);
  purge_locked(now);
  if (jobs_.size() >= max_jobs_ && !evict_one_locked()) return nullptr;
  auto job = std::make_shared<async_job>();
  do {
    job->id = new_id_locked();
  } while (jobs_.count(job->id) != 0);
  job->handler = std::move(handler);
  job->created = now;
  jobs_.emplace(job->id, job);
  return job;
}

std::shared_ptr<async_job> async_store::find(std::string_view id, time_point now) {
  std::lock_guard lock(mu_);
  purge_locked(now);
  const auto it = jobs_.find(std::string(id));
  return it == jobs_.end() ? nullptr : it->second;
}

void async_store::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  jobs_.erase(id);
}

void async_store::finished(const async_job& job, time_point now) {
  std::lock_guard lock(mu_);
  finished_.emplace_back(now, job.id);
}

std::size_t async_store::size() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

}  // namespace hourglass::server::detail
