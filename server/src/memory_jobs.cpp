#include "memory_jobs.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "child_jobs.hpp"
#include "hourglass/jobs/job_state.hpp"
#include "person_wait.hpp"

namespace hourglass::server::detail {

namespace {

// circuit_open is the outcome of a job that ran (a call it made was refused), not a refusal.
bool refused_at_admission(const status& st) {
  return (st.code == outcome::rejected && st.reason != reject_reason::circuit_open) ||
         (st.code == outcome::deadline_exceeded && st.stage == expiry_stage::admission);
}

jobs::job_state state_of(const async_record& r) {
  switch (r.state) {
    case async_state::queued: return jobs::job_state::queued;
    case async_state::running: return jobs::job_state::running;
    case async_state::scheduled: return jobs::job_state::scheduled;
    case async_state::waiting: return jobs::job_state::waiting;
    case async_state::finished: break;
  }
  return jobs::final_state(r.st.code);
}

}  // namespace

std::optional<std::string> memory_jobs::create(std::string_view handler, time_point now, int max_attempts,
                                               std::optional<time_point> due, duration freshness, time_point deadline,
                                               std::string_view parent, std::optional<parent_problem>* refused) {
  std::lock_guard lock(mu_);
  purge_locked(now);
  std::size_t depth = 0;
  if (!parent.empty()) {  // judged under the lock that adds the child: racing children never pass a bound together
    std::optional<parent_problem> problem;
    const auto p = jobs_.find(parent);
    if (p == jobs_.end()) {
      problem = parent_problem::unknown;
    } else if (p->second.rec.state == async_state::finished) {
      problem = parent_problem::finished;
    } else {
      problem = family_bound(p->second.rec.depth, p->second.rec.children.size(), bounds_.family);
      depth = p->second.rec.depth + 1;
    }
    if (problem) {
      if (refused != nullptr) *refused = problem;
      return std::nullopt;
    }
  }
  if (due ? scheduled_ >= bounds_.max_scheduled : jobs_.size() - scheduled_ >= max_jobs_ && !evict_one_locked()) {
    return std::nullopt;
  }
  std::string id;
  do {
    id = new_id_locked();
  } while (jobs_.count(id) != 0);
  entry& e = jobs_[id];
  e.rec.id = id;
  e.rec.handler = std::string(handler);
  e.rec.created = now;
  e.rec.max_attempts = max_attempts;
  e.rec.freshness = freshness;
  e.rec.deadline = deadline;
  if (!parent.empty()) {
    e.rec.parent = std::string(parent);
    e.rec.depth = depth;
    jobs_.find(parent)->second.rec.children.push_back(id);  // held: judged above, under this lock
  }
  if (due) {
    e.rec.state = async_state::scheduled;
    e.rec.due = *due;
    ++scheduled_;
  }
  return id;
}

after_submit memory_jobs::submitted(const std::string& id, job_ref ref) {
  std::lock_guard lock(mu_);
  after_submit next;
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return next;
  entry& e = it->second;
  if (e.rec.state == async_state::finished && refused_at_admission(e.rec.st) && e.rec.attempts.empty() &&
      e.rec.due == time_point{} && e.rec.wakes == 0) {  // a resumed run's refusal is the outcome of a job that ran
    next.refused = e.rec.st;  // nothing ran and nothing will: no job to poll (a retry's record stays)
    erase_locked(it);
    return next;
  }
  e.ref = std::move(ref);
  e.submitted = true;
  next.cancel_now = e.rec.cancel_requested && e.rec.state != async_state::finished;
  next.cause = e.cancel_cause_asked;
  return next;
}

std::string memory_jobs::started(const std::string& id, time_point now) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.rec.state != async_state::queued) return {};
  async_record& r = it->second.rec;
  r.state = async_state::running;
  r.started = now;
  if (r.woke_by.empty()) ++r.attempt;  // a resumed run goes on with its attempt
  return r.woke_by;
}

bool memory_jobs::retry_scheduled(const std::string& id, attempt_summary ended, time_point due,
                                  std::optional<cancel_cause>* cancelled) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.rec.state == async_state::finished) return false;
  if (it->second.rec.cancel_requested) {
    if (cancelled != nullptr) *cancelled = it->second.cancel_cause_asked;
    return false;
  }
  async_record& r = it->second.rec;
  r.state = async_state::scheduled;
  ++scheduled_;
  r.due = due;
  r.woke_by.clear();  // the next attempt starts afresh
  if (r.attempts.size() == max_attempts_listed) r.attempts.erase(r.attempts.begin());
  r.attempts.push_back(std::move(ended));
  it->second.submitted = false;  // until the retry is submitted: a cancel finishes it here
  it->second.ref = {};
  return true;
}

void memory_jobs::hold_payload(const std::string& id, std::shared_ptr<const std::string> payload,
                               std::string content_type) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.rec.state == async_state::finished) return;
  it->second.rec.payload = std::move(payload);
  it->second.rec.payload_type = std::move(content_type);
}

bool memory_jobs::retry_due(const std::string& id) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.rec.state != async_state::scheduled) return false;
  it->second.rec.state = async_state::queued;
  --scheduled_;
  return true;
}

void memory_jobs::finish(const std::string& id, async_outcome o, time_point now) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.rec.state == async_state::finished) return;
  async_record& r = it->second.rec;
  if (r.state == async_state::scheduled) --scheduled_;
  r.state = async_state::finished;
  r.payload.reset();  // what it was sent goes with its outcome, as in a fleet
  r.st = o.st;
  r.timings = o.timings;
  r.finished_at = now;
  r.result = std::move(o.result);
  result_bytes_ += r.result.body.size();
  r.error_http = o.error_http;
  r.error_code = std::move(o.error_code);
  r.error_message = std::move(o.error_message);
  if (r.max_attempts > 1 && r.timings.ran) {  // the last attempt joins the list: every attempt is there
    if (r.attempts.size() == max_attempts_listed) r.attempts.erase(r.attempts.begin());
    const status attempt_st = r.st.stage == expiry_stage::retry ? status::error()
                                                                : r.st;  // it failed; the job then ran out
    r.attempts.push_back({attempt_st, r.error_code, r.error_message, r.timings.run_time});
  }
  finished_.emplace_back(now, id);
  wake_parent_locked(r);
  // The oldest results go first; this one is the newest, and alone within the bound (--max-result).
  while (result_bytes_ > bounds_.max_result_bytes && evict_one_locked()) {
  }
}

// The job `id` if a run of it may end waiting now; else nullptr and why
// (gone, or cancelled, its cause in `cause`).
memory_jobs::entry* memory_jobs::waitable_locked(const std::string& id, cancel_cause* cause, wait_verdict& refused) {
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.rec.state == async_state::finished) {
    refused = wait_verdict::gone;
    return nullptr;
  }
  entry& e = it->second;
  if (e.rec.cancel_requested) {
    if (cause != nullptr) *cause = e.cancel_cause_asked;
    refused = wait_verdict::cancelled;
    return nullptr;
  }
  return &e;
}

memory_jobs::wait_verdict memory_jobs::wait_for_children(const std::string& id, fan_in f, time_point wake_at,
                                                         time_point now, cancel_cause* cause) {
  std::lock_guard lock(mu_);
  wait_verdict refused{};
  entry* found = waitable_locked(id, cause, refused);
  if (found == nullptr) return refused;
  entry& e = *found;
  e.rec.wait = f;
  e.rec.signal.clear();
  e.rec.wake_at = wake_at;
  e.submitted = false;  // until it is submitted again: a cancel finishes it here
  e.ref = {};
  if (wait_satisfied_locked(e.rec) || wake_at <= now) {
    e.rec.state = async_state::queued;
    e.rec.woke_by = wake_at <= now ? "deadline" : "children";
    ++e.rec.wakes;
    return wait_verdict::resume;
  }
  e.rec.state = async_state::waiting;
  return wait_verdict::waiting;
}

bool memory_jobs::wake(const std::string& id, time_point wake_at) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  // (a timer of an earlier wait, fired after its cancel came too late, is not this wait's)
  if (it == jobs_.end() || it->second.rec.state != async_state::waiting || !it->second.rec.wait ||
      it->second.rec.wake_at != wake_at) {
    return false;
  }
  async_record& r = it->second.rec;
  r.state = async_state::queued;
  r.woke_by = "deadline";
  ++r.wakes;
  return true;
}

memory_jobs::wait_verdict memory_jobs::wait_for_signal(const std::string& id, const std::string& name,
                                                       time_point limit_at, time_point now, cancel_cause* cause) {
  std::lock_guard lock(mu_);
  wait_verdict refused{};
  entry* found = waitable_locked(id, cause, refused);
  if (found == nullptr) return refused;
  entry& e = *found;
  e.rec.wait.reset();  // no child's finish resumes it
  e.rec.signal = name;
  e.rec.human_since = now;
  e.rec.human_limit_at = limit_at;
  e.rec.state = async_state::waiting;
  e.submitted = false;
  e.ref = {};
  return wait_verdict::waiting;
}

memory_jobs::signalled memory_jobs::signal(const std::string& id, std::string_view name, std::string payload,
                                           time_point now) {
  std::lock_guard lock(mu_);
  purge_locked(now);
  signalled out;
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return out;
  async_record& r = it->second.rec;
  // (past its limit it is over, though the limit's timer has not ended it yet)
  if (r.state != async_state::waiting || r.wait || r.signal != name || now >= r.human_limit_at) {
    out.verdict = signalled::kind::not_waiting;
    out.job = r;
    return out;
  }
  r.deadline = resumed_deadline(r.deadline, r.human_since, now);
  r.human_waited += elapsed(r.human_since, now);
  r.human_limit_at = time_point::max();
  r.state = async_state::queued;
  r.woke_by = "signal";
  ++r.wakes;
  r.signal_payload = std::move(payload);
  out.verdict = signalled::kind::delivered;
  out.job = r;
  return out;
}

std::optional<async_record> memory_jobs::human_wait_over(const std::string& id, time_point now) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  async_record& r = it->second.rec;
  if (r.state != async_state::waiting || r.wait || r.human_limit_at != now) return std::nullopt;
  r.human_waited += elapsed(r.human_since, now);
  r.human_limit_at = time_point::max();
  r.state = async_state::finished;
  r.payload.reset();
  r.st = status::expired(expiry_stage::human_wait);
  r.finished_at = now;
  finished_.emplace_back(now, id);
  wake_parent_locked(r);
  return r;
}

std::vector<std::string> memory_jobs::take_woken() {
  std::lock_guard lock(mu_);
  return std::exchange(woken_, {});
}

void memory_jobs::wake_parent_locked(const async_record& child) {
  if (child.parent.empty()) return;
  const auto p = jobs_.find(child.parent);
  if (p == jobs_.end()) return;
  async_record& r = p->second.rec;
  ++r.children_done;  // every way a job ends comes here once: the counts stand for a walk over the children
  if (child.st.is_ok()) ++r.children_ok;
  if (r.state != async_state::waiting || !wait_satisfied_locked(r)) return;
  r.state = async_state::queued;
  r.woke_by = "children";
  ++r.wakes;
  woken_.push_back(r.id);
}

bool memory_jobs::wait_satisfied_locked(const async_record& parent) const {
  if (!parent.wait) return false;
  return fan_in_satisfied(*parent.wait, parent.children.size(), parent.children_done, parent.children_ok);
}

std::optional<async_record> memory_jobs::cancel(const std::string& id, time_point now, cancel_cause cause,
                                                std::vector<ended_in_table>* ended) {
  std::vector<std::pair<job_ref, cancel_cause>> running;  // each before its descendants
  std::optional<async_record> ended_here;
  {
    std::lock_guard lock(mu_);
    purge_locked(now);
    const auto root = jobs_.find(id);
    if (root == jobs_.end()) return std::nullopt;
    if (root->second.rec.state == async_state::finished) return root->second.rec;
    std::vector<std::pair<std::string, cancel_cause>> walk{{id, cause}};  // a stack: depth-first, no recursion
    while (!walk.empty()) {
      const auto [job, why] = std::move(walk.back());
      walk.pop_back();
      const auto it = jobs_.find(job);
      if (it == jobs_.end() || it->second.rec.state == async_state::finished) continue;
      entry& e = it->second;
      for (const std::string& child : e.rec.children) walk.emplace_back(child, cancel_cause::parent);
      if (e.rec.state == async_state::scheduled || e.rec.state == async_state::waiting) {  // nothing runs: it ends here
        if (e.rec.state == async_state::scheduled) --scheduled_;
        e.rec.state = async_state::finished;
        e.rec.payload.reset();
        e.rec.st = status::cancelled(why);
        e.rec.timings = {};
        e.rec.finished_at = now;
        finished_.emplace_back(now, job);
        wake_parent_locked(e.rec);
        if (ended != nullptr) ended->push_back({job, e.rec.handler, e.rec.st});
        if (job == id) ended_here = e.rec;
      } else {
        e.rec.cancel_requested = true;
        e.cancel_cause_asked = why;
        if (e.submitted) running.emplace_back(e.ref, why);  // else submitted() cancels it
      }
    }
  }
  // Unlocked: a queued job finishes right here, through finish(). Deepest
  // first: a queued descendant is out of the executor's queue before an
  // ancestor's cancel frees the worker that would take it.
  for (auto it = running.rbegin(); it != running.rend(); ++it) it->first.cancel(it->second);
  if (ended_here) return ended_here;
  return find(id, now);
}

std::optional<memory_jobs::parent_facts> memory_jobs::parent_of_child(const std::string& id, time_point now) {
  std::lock_guard lock(mu_);
  purge_locked(now);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return parent_facts{it->second.rec.state, it->second.rec.deadline};
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

memory_jobs::state_counts memory_jobs::counts(time_point now) {
  std::lock_guard lock(mu_);
  purge_locked(now);
  state_counts c;
  for (const auto& [id, e] : jobs_) {
    switch (e.rec.state) {
      case async_state::queued:
        ++c.queued;
        if (!c.oldest_queued || e.rec.created < *c.oldest_queued) c.oldest_queued = e.rec.created;
        break;
      case async_state::running: ++c.running; break;
      case async_state::scheduled:
        ++c.scheduled;
        if (e.rec.attempt >= 1) ++c.retrying;
        break;
      case async_state::waiting: ++c.waiting; break;
      case async_state::finished: ++c.finished; break;
    }
  }
  return c;
}

void memory_jobs::purge_locked(time_point now) {
  while (!finished_.empty() && saturating_add(finished_.front().first, ttl_) <= now) {
    if (const auto it = jobs_.find(finished_.front().second); it != jobs_.end()) erase_locked(it);
    finished_.pop_front();
  }
}

void memory_jobs::erase_locked(std::map<std::string, entry, std::less<>>::iterator it) {
  result_bytes_ -= it->second.rec.result.body.size();
  jobs_.erase(it);
}

std::size_t memory_jobs::result_bytes() const {
  std::lock_guard lock(mu_);
  return result_bytes_;
}

// Drops the oldest finished job still stored.
bool memory_jobs::evict_one_locked() {
  while (!finished_.empty()) {
    const auto it = jobs_.find(finished_.front().second);
    finished_.pop_front();
    if (it != jobs_.end()) {
      erase_locked(it);
      return true;
    }
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
                                            time_point now, std::string_view handler) {
  const std::optional<jobs::job_filter> filter = jobs::parse_job_filter(state);
  if (!filter) return {};  // no job is in a state that does not exist
  std::lock_guard lock(mu_);
  purge_locked(now);
  std::vector<async_record> page;
  for (auto it = after.empty() ? jobs_.begin() : jobs_.upper_bound(after); it != jobs_.end() && page.size() < limit;
       ++it) {
    const async_record& r = it->second.rec;
    // retrying: scheduled after an attempt (attempt counts those started)
    if (filter->matches(state_of(r), r.attempt >= 1) && (handler.empty() || r.handler == handler)) page.push_back(r);
  }
  return page;
}

job_view view_of(const async_record& r, time_point now) {
  job_view j;
  j.id = r.id;
  j.handler = r.handler;
  j.state = std::string(jobs::to_string(state_of(r)));
  j.age_ms = to_millis(elapsed(r.created, now));
  j.accepted = true;
  const auto since_accepted = [&](time_point t) { return to_millis(elapsed(r.created, t)); };
  if (r.freshness != duration::max()) j.freshness_ms = to_millis(r.freshness);
  if (r.deadline != time_point::max()) j.deadline_at_ms = since_accepted(r.deadline);
  j.parent = r.parent;
  j.children = r.children;
  if (r.payload) j.payload = shown_payload(*r.payload, r.payload_type);
  if (r.due > r.created) j.due_at_ms = since_accepted(r.due);
  if (r.started != time_point{}) j.started_at_ms = since_accepted(r.started);
  if (r.state == async_state::finished) j.finished_at_ms = since_accepted(r.finished_at);
  if (r.max_attempts > 1) {
    j.attempt = r.attempt;
    j.attempts_left = std::max(r.max_attempts - r.attempt, 0);
  }
  for (const attempt_summary& a : r.attempts) {
    attempt_view v;
    v.outcome = std::string(to_string(a.st.code));
    if (a.st.code == outcome::deadline_exceeded) v.stage = std::string(to_string(a.st.stage));
    v.error = a.error_code;
    v.message = a.error_message;
    v.run_ms = to_millis(a.run_time);
    j.attempts.push_back(std::move(v));
  }
  if (r.state == async_state::scheduled) j.due_in_ms = to_millis(r.due > now ? r.due - now : duration::zero());
  if (r.state == async_state::waiting && r.wait) {
    j.waiting_for = fan_in_text(*r.wait);
    if (r.wake_at != time_point::max()) j.wake_in_ms = to_millis(r.wake_at > now ? r.wake_at - now : duration::zero());
  }
  if (!r.signal.empty()) {  // both clocks: the machine's budget and the person's wait
    const bool waiting = r.state == async_state::waiting && !r.wait;
    const time_point until = r.state == async_state::finished ? r.finished_at : now;
    const duration waited = r.human_waited + (waiting ? elapsed(r.human_since, now) : duration::zero());
    if (waiting) {
      j.waiting_for = signal_rule(r.signal);
      if (r.human_limit_at != time_point::max()) j.human_wait_left_ms = to_millis(remaining(r.human_limit_at, now));
    }
    j.human_wait_used_ms = to_millis(waited);
    j.machine_used_ms = to_millis(elapsed(r.created, until) - std::min(waited, elapsed(r.created, until)));
    if (r.deadline != time_point::max() && r.state != async_state::finished) {
      j.machine_left_ms = to_millis(remaining(r.deadline, waiting ? r.human_since : now));
    }
  }
  j.wakes = r.wakes;
  j.woke_by = r.woke_by;
  if (r.state != async_state::finished) {
    j.cancel_requested = r.cancel_requested;
    return j;
  }
  const status& st = r.st;
  if (st.code == outcome::deadline_exceeded) j.stage = to_string(st.stage);
  if (st.code == outcome::cancelled) j.cause = to_string(st.cause);
  if (st.code == outcome::rejected) j.reason = to_string(st.reason);
  if (st.code == outcome::error || (st.code == outcome::deadline_exceeded && st.stage == expiry_stage::retry)) {
    j.error = r.error_code;  // retry: the last attempt's error, kept
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
