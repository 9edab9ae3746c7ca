#include "stores/memory_jobs.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/child_jobs.hpp"
#include "core/person_wait.hpp"
#include "hourglass/jobs/job_state.hpp"

namespace hourglass::server::detail {

namespace {

// circuit_open is the outcome of a job that ran (a call it made was refused), not a refusal.
bool refused_at_admission(const status& st) {
  return (st.code == outcome::rejected && st.reason != reject_reason::circuit_open) ||
         (st.code == outcome::deadline_exceeded && st.stage == expiry_stage::admission);
}

using jobs::job_event;
using jobs::job_state;

// The rule's step for `e` on the record `r` as it stands.
jobs::job_step step_on(const async_record& r, job_event e, jobs::job_facts f = {}) {
  f.cancel_requested = r.cancel_requested;
  f.waits_for_signal = r.state == job_state::waiting && !r.wait;
  return jobs::on_job_event(r.state, e, f);
}

}  // namespace

std::optional<std::string> memory_jobs::create(std::string_view handler, time_point now, int max_attempts,
                                               std::optional<time_point> due, duration freshness, time_point deadline,
                                               std::string_view parent, std::optional<parent_problem>* refused,
                                               std::string_view idempotency_key, bool* duplicate) {
  std::lock_guard lock(mu_);
  purge_locked(now);
  if (!idempotency_key.empty()) {  // judged first, as the fleet's enqueue does: a repeat is answered, never refused
    const auto k = keys_.find(idempotency_key);
    if (k != keys_.end() && now < k->second.second) {
      if (duplicate != nullptr) *duplicate = true;
      return k->second.first;
    }
  }
  std::size_t depth = 0;
  if (!parent.empty()) {  // judged under the lock that adds the child: racing children never pass a bound together
    std::optional<parent_problem> problem;
    const auto p = jobs_.find(parent);
    if (p == jobs_.end()) {
      problem = parent_problem::unknown;
    } else if (jobs::is_final(p->second.rec.state)) {
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
  if (!idempotency_key.empty()) {  // (a lapsed key's old job keeps its record, no longer named by it)
    e.rec.idempotency_key = std::string(idempotency_key);
    keys_.insert_or_assign(e.rec.idempotency_key, std::pair{id, saturating_add(now, bounds_.idempotency_ttl)});
  }
  if (!parent.empty()) {
    e.rec.parent = std::string(parent);
    e.rec.depth = depth;
    jobs_.find(parent)->second.rec.children.push_back(id);  // held: judged above, under this lock
  }
  if (due) {  // accepted delayed: the one way into the table but queued
    e.rec.state = job_state::scheduled;
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
  if (jobs::is_final(e.rec.state) && refused_at_admission(e.rec.st) && e.rec.attempts.empty() &&
      e.rec.due == time_point{} && e.rec.wakes == 0) {  // a resumed run's refusal is the outcome of a job that ran
    next.refused = e.rec.st;  // nothing ran and nothing will: no job to poll (a retry's record stays)
    erase_locked(it);
    return next;
  }
  e.ref = std::move(ref);
  e.submitted = true;
  next.cancel_now = e.rec.cancel_requested && !jobs::is_final(e.rec.state);
  next.cause = e.cancel_cause_asked;
  return next;
}

jobs::woke_by memory_jobs::started(const std::string& id, time_point now) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return jobs::woke_by::none;
  entry& e = it->second;
  const jobs::job_step step = step_on(e.rec, job_event::started);
  if (!step.applies) return jobs::woke_by::none;
  e.rec.started = now;
  move_locked(e, step, now);
  return e.rec.woke_by;
}

bool memory_jobs::retry_scheduled(const std::string& id, attempt_summary ended, time_point due,
                                  std::optional<cancel_cause>* cancelled) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return false;
  entry& e = it->second;
  const jobs::job_step step = step_on(e.rec, job_event::ended_retryable);
  if (!step.applies) return false;
  if (step.next != job_state::scheduled) {  // a cancel reached the run: its caller records it cancelled
    if (cancelled != nullptr) *cancelled = e.cancel_cause_asked;
    return false;
  }
  async_record& r = e.rec;
  r.due = due;
  r.woke_by = jobs::woke_by::none;  // the next attempt starts afresh
  if (r.attempts.size() == max_attempts_listed) r.attempts.erase(r.attempts.begin());
  r.attempts.push_back(std::move(ended));
  move_locked(e, step, due);
  return true;
}

void memory_jobs::hold_payload(const std::string& id, std::shared_ptr<const std::string> payload,
                               std::string content_type) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || jobs::is_final(it->second.rec.state)) return;
  it->second.rec.payload = std::move(payload);
  it->second.rec.payload_type = std::move(content_type);
}

bool memory_jobs::retry_due(const std::string& id) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return false;
  const jobs::job_step step = step_on(it->second.rec, job_event::due);
  if (!step.applies) return false;  // cancelled while it waited
  move_locked(it->second, step, it->second.rec.due);
  return true;
}

void memory_jobs::finish(const std::string& id, async_outcome o, time_point now) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  const jobs::job_step step = step_on(it->second.rec, job_event::ended, {.ended_with = o.st.code});
  if (!step.applies) return;  // a second outcome: the first stands
  async_record& r = it->second.rec;
  r.st = o.st;
  r.timings = o.timings;
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
  move_locked(it->second, step, now);
  // The oldest results go first; this one is the newest, and alone within the bound (--max-result).
  while (result_bytes_ > bounds_.max_result_bytes && evict_one_locked()) {
  }
}

void memory_jobs::move_locked(entry& e, const jobs::job_step& step, time_point now) {
  async_record& r = e.rec;
  const job_state from = r.state;
  r.state = step.next;
  if (from == job_state::scheduled) --scheduled_;
  if (step.next == job_state::scheduled) ++scheduled_;
  if (from == job_state::running && !jobs::is_final(step.next) && step.next != job_state::running) {
    e.submitted = false;  // until its next run is submitted: a cancel ends it here
    e.ref = {};
  }
  if (jobs::has(step.actions, jobs::count_attempt) && r.woke_by == jobs::woke_by::none) {
    ++r.attempt;  // a resumed run goes on with its attempt
  }
  if (jobs::has(step.actions, jobs::wake_count)) {
    r.woke_by = step.woke;
    ++r.wakes;
  }
  if (jobs::has(step.actions, jobs::record_outcome)) {
    r.payload.reset();  // what it was sent goes with its outcome, as in a fleet
    r.finished_at = now;
    finished_.emplace_back(now, r.id);
  }
  if (jobs::has(step.actions, jobs::count_down_parent)) wake_parent_locked(r);
}

// The job `id` if a run of it may end waiting now; else nullptr and why
// (gone, or cancelled, its cause in `cause`).
memory_jobs::entry* memory_jobs::waitable_locked(const std::string& id, cancel_cause* cause, wait_verdict& refused) {
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.rec.state != job_state::running) {
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
  const jobs::job_step step = step_on(e.rec, job_event::waits_for_children,
                                      {.wait_over = wait_satisfied_locked(e.rec), .wake_due = wake_at <= now});
  move_locked(e, step, now);
  return step.next == job_state::waiting ? wait_verdict::waiting : wait_verdict::resume;
}

bool memory_jobs::wake(const std::string& id, time_point wake_at) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  // (a timer of an earlier wait, fired after its cancel came too late, is not this wait's)
  if (it == jobs_.end() || it->second.rec.wake_at != wake_at) return false;
  const jobs::job_step step = step_on(it->second.rec, job_event::woke);
  if (!step.applies) return false;
  move_locked(it->second, step, wake_at);
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
  move_locked(e, step_on(e.rec, job_event::waits_for_signal), now);
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
  const jobs::job_step step = step_on(r, job_event::signalled);
  // (past its limit it is over, though the limit's timer has not ended it yet)
  if (!step.applies || r.signal != name || now >= r.human_limit_at) {
    out.verdict = signalled::kind::not_waiting;
    out.job = r;
    return out;
  }
  r.deadline = resumed_deadline(r.deadline, r.human_since, now);
  r.human_waited += elapsed(r.human_since, now);
  r.human_limit_at = time_point::max();
  r.signal_payload = std::move(payload);
  move_locked(it->second, step, now);
  out.verdict = signalled::kind::delivered;
  out.job = r;
  return out;
}

std::optional<async_record> memory_jobs::human_wait_over(const std::string& id, time_point now) {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  async_record& r = it->second.rec;
  const jobs::job_step step = step_on(r, job_event::wait_limit);
  if (!step.applies || r.human_limit_at != now) return std::nullopt;
  r.human_waited += elapsed(r.human_since, now);
  r.human_limit_at = time_point::max();
  r.st = status::expired(expiry_stage::human_wait);
  move_locked(it->second, step, now);
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
  const jobs::job_step step = step_on(r, job_event::child_ended, {.wait_over = wait_satisfied_locked(r)});
  if (!step.applies) return;
  move_locked(p->second, step, child.finished_at);
  woken_.push_back(r.id);  // the store submits it, its children still unfinished cancelled
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
    if (jobs::is_final(root->second.rec.state)) return root->second.rec;
    std::vector<std::pair<std::string, cancel_cause>> walk{{id, cause}};  // a stack: depth-first, no recursion
    while (!walk.empty()) {
      const auto [job, why] = std::move(walk.back());
      walk.pop_back();
      const auto it = jobs_.find(job);
      if (it == jobs_.end()) continue;
      entry& e = it->second;
      const jobs::job_step step = step_on(e.rec, job_event::cancel_asked);
      if (!step.applies) continue;  // finished: its family is left as it is
      if (jobs::has(step.actions, jobs::cancel_children)) {
        for (const std::string& child : e.rec.children) walk.emplace_back(child, cancel_cause::parent);
      }
      // Queued or running, the executor holds it: its cancel ends a queued
      // one at once and stops a running one, and the outcome is recorded
      // as its run ends (finish), with the run's timings.
      const bool executor_holds = e.rec.state == job_state::queued || e.rec.state == job_state::running;
      if (!executor_holds) {  // scheduled or waiting: nothing runs, it ends here
        e.rec.st = status::cancelled(why);
        e.rec.timings = {};
        move_locked(e, step, now);
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
      case job_state::queued:
        ++c.queued;
        if (!c.oldest_queued || e.rec.created < *c.oldest_queued) c.oldest_queued = e.rec.created;
        break;
      case job_state::running: ++c.running; break;
      case job_state::scheduled:
        ++c.scheduled;
        if (e.rec.attempt >= 1) ++c.retrying;
        break;
      case job_state::waiting: ++c.waiting; break;
      default: ++c.finished; break;
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
  if (const std::string& key = it->second.rec.idempotency_key; !key.empty()) {
    const auto k = keys_.find(key);
    if (k != keys_.end() && k->second.first == it->first) keys_.erase(k);
  }
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
    if (filter->matches(r.state, r.attempt >= 1) && (handler.empty() || r.handler == handler)) page.push_back(r);
  }
  return page;
}

}  // namespace hourglass::server::detail
