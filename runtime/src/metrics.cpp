#include "hourglass/metrics.hpp"

#include <algorithm>
#include <mutex>

#include "hourglass/utf8.hpp"

namespace hourglass {
namespace {

std::uint64_t non_negative_ns(duration d) noexcept {
  return d.count() <= 0 ? 0 : static_cast<std::uint64_t>(d.count());
}

// ---- rendering helpers ---------------------------------------------------

using handler_field = std::uint64_t handler_snapshot::*;

struct labelled_field {
  std::string_view label_value;
  handler_field field;
};

void handler_family(exposition_writer& w, const metrics_snapshot& s, std::string_view name, std::string_view help,
                    std::string_view label_name, std::initializer_list<labelled_field> fields) {
  w.family(name, metric_type::counter, help);
  for (const auto& h : s.handlers) {
    for (const auto& f : fields) {
      if (label_name.empty()) {
        w.sample(name, {{"handler", h.name}}, h.*(f.field));
      } else {
        w.sample(name, {{"handler", h.name}, {label_name, f.label_value}}, h.*(f.field));
      }
    }
  }
}

constexpr std::array<std::string_view, prometheus_bucket_bounds_ns.size()> bucket_labels = {
    "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
    "0.1",    "0.25",    "0.5",    "1",     "2.5",    "5",     "10",   "30",    "60"};

void histogram_family(exposition_writer& w, std::string_view name, std::string_view help, const histogram_snapshot& h) {
  w.family(name, metric_type::histogram, help);
  // One pass over the ~2,000 buckets, not one per bound.
  std::array<std::uint64_t, prometheus_bucket_bounds_ns.size()> cumulative{};
  h.counts_at_or_below(prometheus_bucket_bounds_ns, cumulative);
  std::string series(name);  // name_bucket, name_sum, name_count in turn
  series.append("_bucket");
  for (std::size_t i = 0; i < prometheus_bucket_bounds_ns.size(); ++i) {
    w.sample(series, {{"le", bucket_labels[i]}}, cumulative[i]);
  }
  w.sample(series, {{"le", "+Inf"}}, h.count);
  series.resize(name.size());
  w.sample(series.append("_sum"), metric_value::seconds_from_ns(h.sum_ns));
  series.resize(name.size());
  w.sample(series.append("_count"), h.count);
}

handler_snapshot snapshot_of(const handler_metrics& h) {
  handler_snapshot s;
  s.name = h.name;
  s.admitted = h.admitted.value();
  s.rejected_queue_full = h.rejected_queue_full.value();
  s.rejected_insufficient_budget = h.rejected_insufficient_budget.value();
  s.rejected_invalid_timeout = h.rejected_invalid_timeout.value();
  s.rejected_shutting_down = h.rejected_shutting_down.value();
  s.rejected_broker_unavailable = h.rejected_broker_unavailable.value();
  s.rejected_queue_paused = h.rejected_queue_paused.value();
  s.rejected_cancelled = h.rejected_cancelled.value();
  s.expired_queue = h.expired_queue.value();
  s.expired_run = h.expired_run.value();
  s.expired_reclaim = h.expired_reclaim.value();
  s.expired_idle = h.expired_idle.value();
  s.expired_retry = h.expired_retry.value();
  s.expired_human_wait = h.expired_human_wait.value();
  s.job_retries_scheduled = h.job_retries_scheduled.value();
  s.job_retries_exhausted = h.job_retries_exhausted.value();
  s.job_retries_no_budget = h.job_retries_no_budget.value();
  s.finished_ok = h.finished_ok.value();
  s.finished_error = h.finished_error.value();
  s.finished_rejected = h.finished_rejected.value();
  s.finished_deadline_exceeded = h.finished_deadline_exceeded.value();
  s.finished_cancelled = h.finished_cancelled.value();
  s.completed_late = h.completed_late.value();
  s.completed_late_ns = h.completed_late_ns.value();
  return s;
}

}  // namespace

// ---- metrics_snapshot ----------------------------------------------------

const handler_snapshot* metrics_snapshot::find(std::string_view handler_name) const noexcept {
  const auto it = std::lower_bound(handlers.begin(), handlers.end(), handler_name,
                                   [](const handler_snapshot& h, std::string_view n) { return h.name < n; });
  return it != handlers.end() && it->name == handler_name ? &*it : nullptr;
}

// ---- metrics -------------------------------------------------------------

metrics::metrics() : metrics(metrics_options{}) {}

metrics::metrics(metrics_options options)
    : request_budget(options.histogram_precision),
      queue_delay(options.histogram_precision),
      remaining_budget_at_dispatch(options.histogram_precision),
      run_duration(options.histogram_precision),
      time_to_first_output(options.histogram_precision),
      options_(options) {}

metrics::~metrics() = default;

handler_metrics& metrics::handler(std::string_view name) {
  {
    std::shared_lock lock(mutex_);
    if (const auto it = by_name_.find(name); it != by_name_.end()) return *it->second;
    if (named_ >= options_.max_handlers && other_ != nullptr) return *other_;
  }
  std::unique_lock lock(mutex_);
  if (const auto it = by_name_.find(name); it != by_name_.end()) return *it->second;
  if (name == overflow_handler || named_ >= options_.max_handlers || !valid_utf8(name)) {
    return overflow_locked();
  }
  ++named_;
  return create_locked(name);
}

handler_metrics& metrics::create_locked(std::string_view name) {
  owned_.push_back(std::make_unique<handler_metrics>(std::string(name)));
  handler_metrics& h = *owned_.back();
  by_name_.emplace(std::string_view(h.name), &h);
  return h;
}

handler_metrics& metrics::overflow_locked() {
  if (other_ == nullptr) other_ = &create_locked(overflow_handler);
  return *other_;
}

std::size_t metrics::handler_count() const {
  std::shared_lock lock(mutex_);
  return owned_.size();
}

void metrics::on_admitted(handler_metrics& h, duration budget) noexcept {
  h.admitted.add();
  if (budget != duration::max()) request_budget.record(budget);
}

void metrics::on_rejected(handler_metrics& h, reject_reason reason) noexcept {
  switch (reason) {
    case reject_reason::queue_full: h.rejected_queue_full.add(); break;
    case reject_reason::shutting_down: h.rejected_shutting_down.add(); break;
    case reject_reason::broker_unavailable: h.rejected_broker_unavailable.add(); break;
    case reject_reason::queue_paused: h.rejected_queue_paused.add(); break;
    // Never an admission refusal: a job that ran and whose call an open
    // breaker refused (count_finish counts it as finished, rejected).
    case reject_reason::circuit_open:
    case reject_reason::none: break;
  }
}

void metrics::on_insufficient_budget(handler_metrics& h) noexcept { h.rejected_insufficient_budget.add(); }

void metrics::on_invalid_timeout(handler_metrics& h) noexcept { h.rejected_invalid_timeout.add(); }

void metrics::on_refused(handler_metrics& h, const status& st) noexcept {
  switch (st.code) {
    case outcome::rejected: on_rejected(h, st.reason); break;
    case outcome::deadline_exceeded: h.rejected_insufficient_budget.add(); break;
    case outcome::cancelled: h.rejected_cancelled.add(); break;
    case outcome::invalid: h.rejected_invalid_timeout.add(); break;
    case outcome::ok:
    case outcome::error: break;
  }
}

void metrics::on_dispatch(duration queue_delay_time, duration remaining_at_dispatch, metrics_shard* shard) noexcept {
  if (shard != nullptr) {
    shard->queue_delay.record_single_writer(queue_delay_time);
    if (remaining_at_dispatch != duration::max()) {
      shard->remaining_budget_at_dispatch.record_single_writer(remaining_at_dispatch);
    }
    return;
  }
  queue_delay.record(queue_delay_time);
  if (remaining_at_dispatch != duration::max()) remaining_budget_at_dispatch.record(remaining_at_dispatch);
}

void metrics::on_finished(handler_metrics& h, const status& st, duration run_time, bool completed_late,
                          metrics_shard* shard) noexcept {
  if (count_finish(h, st, run_time)) {
    if (shard != nullptr) {
      shard->run_duration.record_single_writer(run_time);
    } else {
      run_duration.record(run_time);
    }
  }
  if (completed_late) {
    h.completed_late.add();
    h.completed_late_ns.add(non_negative_ns(run_time));
  }
}

void metrics::on_recorded(handler_metrics& h, const status& st) noexcept { count_finish(h, st, duration::zero()); }

bool metrics::count_finish(handler_metrics& h, const status& st, duration run_time) noexcept {
  bool ran = false;
  switch (st.code) {
    case outcome::ok:
      h.finished_ok.add();
      ran = true;
      break;
    case outcome::error:
      h.finished_error.add();
      ran = true;
      break;
    case outcome::deadline_exceeded:
      if (st.stage == expiry_stage::admission) {  // refused, never admitted: not a finish
        h.rejected_insufficient_budget.add();
        break;
      }
      h.finished_deadline_exceeded.add();
      switch (st.stage) {
        case expiry_stage::admission: break;
        case expiry_stage::queue: h.expired_queue.add(); break;
        case expiry_stage::reclaim: h.expired_reclaim.add(); break;
        case expiry_stage::run:
          h.expired_run.add();
          ran = true;
          break;
        case expiry_stage::idle:
          h.expired_idle.add();
          ran = true;
          break;
        case expiry_stage::retry:  // its last attempt ran and failed
          h.expired_retry.add();
          ran = true;
          break;
        case expiry_stage::human_wait:  // it ran, then waited for a person longer than allowed
          h.expired_human_wait.add();
          ran = true;
          break;
        case expiry_stage::downstream:
        case expiry_stage::none: ran = true; break;
      }
      break;
    case outcome::cancelled:
      h.finished_cancelled.add();
      ran = run_time > duration::zero();
      break;
    case outcome::rejected:
      if (st.reason == reject_reason::circuit_open) {  // admitted and run: a finish
        h.finished_rejected.add();
        ran = true;
      } else {
        on_rejected(h, st.reason);
      }
      break;
    case outcome::invalid: h.rejected_invalid_timeout.add(); break;  // refused: never a finish
  }
  return ran;
}

void metrics::on_first_output(duration since_start) noexcept { time_to_first_output.record(since_start); }

void metrics::on_job_retry(handler_metrics& h, job_retry_verdict verdict) noexcept {
  switch (verdict) {
    case job_retry_verdict::scheduled: h.job_retries_scheduled.add(); break;
    case job_retry_verdict::exhausted: h.job_retries_exhausted.add(); break;
    case job_retry_verdict::no_budget: h.job_retries_no_budget.add(); break;
    case job_retry_verdict::not_retryable: break;
  }
}

void metrics::on_retry_attempt() noexcept { retries.attempts.fetch_add(1, std::memory_order_relaxed); }
void metrics::on_retry_denied_deadline() noexcept { retries.denied_deadline.fetch_add(1, std::memory_order_relaxed); }
void metrics::on_retry_denied_budget() noexcept { retries.denied_retry_budget.fetch_add(1, std::memory_order_relaxed); }

metrics_snapshot metrics::snapshot() const {
  metrics_snapshot s;
  s.queue_depth = queue_depth.value();
  s.workers_busy = workers_busy.value();
  {
    std::shared_lock lock(mutex_);
    s.handlers.reserve(by_name_.size());
    for (const auto& [name, h] : by_name_) s.handlers.push_back(snapshot_of(*h));  // map order: sorted
    if (gauge_owner_ != nullptr) {
      s.queue_depth = queue_depth_of_(gauge_owner_);
      s.workers_busy = workers_busy_of_(gauge_owner_);
    }
  }
  s.retry_attempts = retries.attempts.load(std::memory_order_relaxed);
  s.retries_denied_deadline = retries.denied_deadline.load(std::memory_order_relaxed);
  s.retries_denied_retry_budget = retries.denied_retry_budget.load(std::memory_order_relaxed);
  s.request_budget = request_budget.snapshot();
  s.queue_delay = queue_delay.snapshot();
  s.remaining_budget_at_dispatch = remaining_budget_at_dispatch.snapshot();
  s.run_duration = run_duration.snapshot();
  s.time_to_first_output = time_to_first_output.snapshot();
  std::shared_lock lock(mutex_);
  for (const auto& shard : shards_) {
    s.queue_delay.merge(shard->queue_delay.snapshot());
    s.remaining_budget_at_dispatch.merge(shard->remaining_budget_at_dispatch.snapshot());
    s.run_duration.merge(shard->run_duration.snapshot());
  }
  return s;
}

metrics_shard* metrics::acquire_shard() {
  std::unique_lock lock(mutex_);
  if (!free_shards_.empty()) {
    metrics_shard* shard = free_shards_.back();
    free_shards_.pop_back();
    return shard;
  }
  shards_.push_back(std::make_unique<metrics_shard>(options_.histogram_precision));
  return shards_.back().get();
}

void metrics::release_shard(metrics_shard* shard) {
  if (shard == nullptr) return;
  std::unique_lock lock(mutex_);
  free_shards_.push_back(shard);
}

void metrics::attach_gauges(const void* owner, gauge_reader queue_depth_of, gauge_reader workers_busy_of) {
  std::unique_lock lock(mutex_);
  gauge_owner_ = owner;
  queue_depth_of_ = queue_depth_of;
  workers_busy_of_ = workers_busy_of;
}

void metrics::detach_gauges(const void* owner) {
  std::unique_lock lock(mutex_);
  if (gauge_owner_ != owner || owner == nullptr) return;
  queue_depth.set(queue_depth_of_(owner));
  workers_busy.set(workers_busy_of_(owner));
  gauge_owner_ = nullptr;
  queue_depth_of_ = nullptr;
  workers_busy_of_ = nullptr;
}

// ---- rendering -----------------------------------------------------------

std::string render_prometheus(const metrics_snapshot& s) {
  std::string out;
  out.reserve(4096 + s.handlers.size() * 2048);
  exposition_writer w(out);
  render_prometheus(s, w);
  return out;
}

void render_prometheus(const metrics_snapshot& s, exposition_writer& w) {
  handler_family(w, s, "hourglass_jobs_admitted_total", "Jobs admitted to the queue.", "",
                 {{"", &handler_snapshot::admitted}});
  handler_family(w, s, "hourglass_jobs_rejected_total",
                 "Jobs refused before they were queued; offered = admitted + rejected.", "reason",
                 {{to_string(reject_reason::queue_full), &handler_snapshot::rejected_queue_full},
                  {"insufficient_budget", &handler_snapshot::rejected_insufficient_budget},
                  {"invalid_timeout", &handler_snapshot::rejected_invalid_timeout},
                  {to_string(reject_reason::shutting_down), &handler_snapshot::rejected_shutting_down},
                  {to_string(reject_reason::broker_unavailable), &handler_snapshot::rejected_broker_unavailable},
                  {to_string(reject_reason::queue_paused), &handler_snapshot::rejected_queue_paused},
                  {"cancelled", &handler_snapshot::rejected_cancelled}});
  handler_family(w, s, "hourglass_jobs_expired_total", "Jobs whose deadline passed, by stage.", "stage",
                 {{to_string(expiry_stage::queue), &handler_snapshot::expired_queue},
                  {to_string(expiry_stage::run), &handler_snapshot::expired_run},
                  {to_string(expiry_stage::idle), &handler_snapshot::expired_idle},
                  {to_string(expiry_stage::reclaim), &handler_snapshot::expired_reclaim},
                  {to_string(expiry_stage::retry), &handler_snapshot::expired_retry},
                  {to_string(expiry_stage::human_wait), &handler_snapshot::expired_human_wait}});
  handler_family(w, s, "hourglass_jobs_finished_total",
                 "Admitted jobs that finished, by outcome; admitted = finished + in flight.", "outcome",
                 {{to_string(outcome::ok), &handler_snapshot::finished_ok},
                  {to_string(outcome::error), &handler_snapshot::finished_error},
                  {to_string(outcome::rejected), &handler_snapshot::finished_rejected},
                  {to_string(outcome::deadline_exceeded), &handler_snapshot::finished_deadline_exceeded},
                  {to_string(outcome::cancelled), &handler_snapshot::finished_cancelled}});
  handler_family(w, s, "hourglass_jobs_completed_late_total", "Jobs that finished after their deadline (wasted work).",
                 "", {{"", &handler_snapshot::completed_late}});

  constexpr std::string_view late_seconds = "hourglass_jobs_completed_late_seconds_total";
  w.family(late_seconds, metric_type::counter,
           "Worker time spent on jobs that finished after their deadline, in seconds.");
  for (const auto& h : s.handlers) {
    w.sample(late_seconds, {{"handler", h.name}}, metric_value::seconds_from_ns(h.completed_late_ns));
  }

  handler_family(w, s, "hourglass_job_retries_total",
                 "What became of async jobs' failed attempts that a retry policy covered.", "result",
                 {{to_string(job_retry_verdict::scheduled), &handler_snapshot::job_retries_scheduled},
                  {to_string(job_retry_verdict::exhausted), &handler_snapshot::job_retries_exhausted},
                  {to_string(job_retry_verdict::no_budget), &handler_snapshot::job_retries_no_budget}});

  w.counter("hourglass_retry_attempts_total", "Retry attempts made.", s.retry_attempts);
  w.family("hourglass_retries_denied_total", metric_type::counter, "Retries refused, by reason.");
  w.sample("hourglass_retries_denied_total", {{"reason", "deadline"}}, s.retries_denied_deadline);
  w.sample("hourglass_retries_denied_total", {{"reason", "retry_budget"}}, s.retries_denied_retry_budget);

  histogram_family(w, "hourglass_request_budget_seconds", "Budget of admitted jobs that had a deadline.",
                   s.request_budget);
  histogram_family(w, "hourglass_queue_delay_seconds", "Time from admission to dispatch.", s.queue_delay);
  histogram_family(w, "hourglass_remaining_budget_at_dispatch_seconds",
                   "Budget left when a job with a deadline was dispatched.", s.remaining_budget_at_dispatch);
  histogram_family(w, "hourglass_run_duration_seconds", "Time jobs spent running on a worker.", s.run_duration);
  histogram_family(w, "hourglass_time_to_first_output_seconds",
                   "Time from a streamed response's request to its first bytes.", s.time_to_first_output);

  w.gauge("hourglass_queue_depth", "Jobs waiting in the queue.", s.queue_depth);
  w.gauge("hourglass_workers_busy", "Workers running a job.", s.workers_busy);
}

}  // namespace hourglass
