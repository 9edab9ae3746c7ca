// The memory job store: async jobs in this process's memory (memory_jobs),
// run on its executor.
#include <mutex>

#include "core.hpp"
#include "job_input.hpp"
#include "job_store.hpp"
#include "memory_jobs.hpp"

namespace hourglass::server::detail {

namespace {

async_outcome outcome_of(job_result<handler_result>& r, const error_info& err) {
  async_outcome o;
  o.st = r.st;
  o.timings = r.timings;
  if (r.result) o.result = std::move(*r.result);
  if (r.st.code == outcome::error) {
    o.error_http = err.http_status;
    o.error_code = err.code;
    o.error_message = err.message;
  }
  return o;
}

class memory_job_store final : public job_store {
 public:
  explicit memory_job_store(core& c) : c_(c), jobs_(c.opts.async_max_jobs, c.opts.async_ttl) {}

  // Stores the job and submits it: it may start by headers_at + freshness and
  // runs at most its handler's run_limit.
  void create(new_job job, callback<created> done) override {
    const handler_entry& e = *job.in->entry;
    created out;
    const std::optional<std::string> id = jobs_.create(e.name, c_.clk.now());
    if (!id) {
      out.verdict = created::kind::refused;
      out.refusal = status::rejected(reject_reason::queue_full);
      out.note = "async job store full";
      return done(std::move(out));
    }
    job_options o;
    o.metrics = e.metrics;
    o.start_by = saturating_add(job.headers_at, job.freshness);
    o.run_limit = e.run_limit;
    o.idle_limit = job.in->idle_limit;
    job_ref ref = c_.jobs->submit(
        o,
        [this, in = job.in, id = *id](const context& ctx) -> handler_result {
          jobs_.started(id);
          request_view v = in->view();
          if (v.idempotency_key.empty()) v.idempotency_key = id;
          return in->entry->fn(ctx, v);
        },
        [this, id = *id, entry = &e](job_result<handler_result>&& r) noexcept {
          const error_info err = r.st.code == outcome::error ? describe_error(r.error) : error_info{};
          job_report rep{entry->name, "async", duration::max(), r.timings, r.st, 0};
          if (r.st.code == outcome::error) rep.note = err.detail;
          c_.log_job(rep);
          jobs_.finish(id, outcome_of(r, err), c_.clk.now());
        });
    const after_submit next = jobs_.submitted(*id, ref);
    if (next.cancel_now) ref.cancel(cancel_cause::requested);
    if (next.refused) {  // the executor refused it, and booked it
      out.verdict = created::kind::refused;
      out.refusal = *next.refused;
      out.booked = true;
      return done(std::move(out));
    }
    out.job.id = *id;
    out.job.state = "queued";
    done(std::move(out));
  }

  void find(std::string id, callback<found> done) override {
    const time_point now = c_.clk.now();
    done(found_of(jobs_.find(id, now), now));
  }

  void cancel(std::string id, callback<found> done) override {
    const time_point now = c_.clk.now();
    done(found_of(jobs_.cancel(id, now), now));
  }

  void list(list_request q, callback<job_page> done) override {
    const time_point now = c_.clk.now();
    job_page page;
    const std::size_t limit = std::max<std::size_t>(q.limit, 1);
    for (const async_record& r : jobs_.list(q.state, q.cursor, limit, now)) page.jobs.push_back(view_of(r, now));
    // A full page may have more after it; the next walk from its last id says.
    if (page.jobs.size() == limit) page.next_cursor = page.jobs.back().id;
    done(std::move(page));
  }

  // The table's size against its bound: what a soak watches for growth.
  void write_metrics(exposition_writer& w) const override {
    w.gauge("hourglass_async_jobs_stored", "Async jobs held (queued, running, or finished within --async-ttl).",
            jobs_.size());
  }

 private:
  static found found_of(const std::optional<async_record>& r, time_point now) {
    found f;
    if (!r) return f;
    f.verdict = found::kind::found;
    f.job = view_of(*r, now);
    return f;
  }

  core& c_;
  memory_jobs jobs_;
};

}  // namespace

std::unique_ptr<job_store> make_memory_job_store(core& c) { return std::make_unique<memory_job_store>(c); }

}  // namespace hourglass::server::detail
