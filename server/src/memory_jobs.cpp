#include "memory_jobs.hpp"

#include <cstdio>
#include <utility>

namespace hourglass::server::detail {

namespace {

// circuit_open is the outcome of a job that ran (a call it made was refused), not a refusal.
bool refused_at_admission(const status& st) {
  return (st.code == outcome::rejected && st.reason != reject_reason::circuit_open) ||
         (st.code == outcome::deadline_exceeded && st.stage == expiry_stage::admission);
}

std::string_view state_name(const async_record& r) {
  switch (r.state) {
    case async_state::queued: return "queued";
    case async_state::running: return "running";
    case async_state::finished: break;
  }
  return to_string(r.st.code);
}

bool state_matches(const async_record& r, std::string_view filter) {
  if (filter.empty()) return true;
  if (filter == "finished") return r.state == async_state::finished;
  return state_name(r) == filter;
}

}  // namespace

std::optional<std::string> memory_jobs::create(std::string_view handler, time_point now) {
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

after_submit memory_jobs::submitted(const std::string& id, job_ref ref) {
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

void memory_jobs::started(const std::string& id) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it != jobs_.end() && it->second.rec.state == async_state::queued) it->second.rec.state = async_state::running;
}

void memory_jobs::finish(const std::string& id, async_outcome o, time_point now) {
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

std::optional<async_record> memory_jobs::cancel(const std::string& id, time_point now) {
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

std::optional<async_record> memory_jobs::find(const std::string& id, time_point now) {
  std::lock_guard lock(mu_);
  purge_locked(now);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.rec;
}

std::size_t memory_jobs::size() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

void memory_jobs::purge_locked(time_point now) {
  while (!finished_.empty() && saturating_add(finished_.front().first, ttl_) <= now) {
    jobs_.erase(finished_.front().second);
    finished_.pop_front();
  }
}

// Drops the oldest finished job still stored.
bool memory_jobs::evict_one_locked() {
  while (!finished_.empty()) {
    const auto erased = jobs_.erase(finished_.front().second);
    finished_.pop_front();
    if (erased != 0) return true;
  }
  return false;
}

// 128 bits from the OS's generator: ids are not guessable from one another.
std::string memory_jobs::new_id_locked() {
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", static_cast<unsigned>(rng_()));
  return buf;
}

std::vector<async_record> memory_jobs::list(std::string_view state, const std::string& after, std::size_t limit,
                                            time_point now) {
  std::lock_guard lock(mu_);
  purge_locked(now);
  std::vector<async_record> page;
  for (auto it = after.empty() ? jobs_.begin() : jobs_.upper_bound(after); it != jobs_.end() && page.size() < limit;
       ++it) {
    if (state_matches(it->second.rec, state)) page.push_back(it->second.rec);
  }
  return page;
}

job_view view_of(const async_record& r, time_point now) {
  job_view j;
  j.id = r.id;
  j.handler = r.handler;
  j.state = std::string(state_name(r));
  j.age_ms = to_millis(elapsed(r.created, now));
  if (r.state != async_state::finished) {
    j.cancel_requested = r.cancel_requested;
    return j;
  }
  const status& st = r.st;
  if (st.code == outcome::deadline_exceeded) j.stage = to_string(st.stage);
  if (st.code == outcome::cancelled) j.cause = to_string(st.cause);
  if (st.code == outcome::rejected) j.reason = to_string(st.reason);
  if (st.code == outcome::error) {
    j.error = r.error_code;
    j.message = r.error_message;
    j.http_status = r.error_http;
  }
  j.queued_ms = to_millis(r.timings.queue_delay);
  if (r.timings.ran) j.run_ms = to_millis(r.timings.run_time);
  j.committed = r.timings.committed;
  if (st.is_ok()) {
    j.content_type = r.result.content_type;
    j.result = r.result.body;
  }
  return j;
}

}  // namespace hourglass::server::detail
