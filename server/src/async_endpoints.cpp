#include "async_endpoints.hpp"

#include "hourglass/utf8.hpp"
#include "request_rules.hpp"

namespace hourglass::server::detail {

namespace http = boost::beast::http;

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

}  // namespace

response submit_async_job(core& c, std::shared_ptr<const job_input> in, time_point headers_at, duration freshness) {
  const handler_entry& e = *in->entry;
  const std::optional<std::string> id = c.async_jobs->create(e.name, c.clk.now());
  if (!id) {
    const status st = status::rejected(reject_reason::queue_full);
    return c.refuse({e, "async", st, duration::max(), "async job store full"},
                    job_response(st, {}, duration::max(), duration::max(), nullptr, nullptr));
  }

  job_options o;
  o.metrics = e.metrics;
  o.start_by = saturating_add(headers_at, freshness);
  o.run_limit = e.run_limit;
  o.idle_limit = in->idle_limit;
  core* cp = &c;
  job_ref ref = c.jobs->submit(
      o,
      [in, cp, id = *id](const context& ctx) -> handler_result {
        cp->async_jobs->started(id);
        request_view v = in->view();
        if (v.idempotency_key.empty()) v.idempotency_key = id;
        return in->entry->fn(ctx, v);
      },
      [cp, id = *id, entry = &e](job_result<handler_result>&& r) noexcept {
        const error_info err = r.st.code == outcome::error ? describe_error(r.error) : error_info{};
        job_report rep{entry->name, "async", duration::max(), r.timings, r.st, 0};
        if (r.st.code == outcome::error) rep.note = err.detail;
        cp->log_job(rep);
        cp->async_jobs->finish(id, outcome_of(r, err), cp->clk.now());
      });

  const after_submit next = c.async_jobs->submitted(*id, ref);
  if (next.cancel_now) ref.cancel(cancel_cause::requested);
  if (next.refused) return job_response(*next.refused, {}, duration::max(), duration::max(), nullptr, nullptr);

  const std::string location = std::string(jobs_path) + *id;
  support::json_object body;
  body.add("id", *id).add("state", "queued").add("location", location);
  response res = make_response(202, body.str(), json_type);
  res.set(http::field::location, location);
  res.set("Server-Timing", server_timing({}));  // nothing spent yet; GET reports the job's own
  return res;
}

std::string async_job_json(const async_record& r, time_point now) {
  support::json_object o;
  o.add("id", r.id).add("handler", r.handler);
  if (r.state != async_state::finished) {
    o.add("state", r.state == async_state::running ? "running" : "queued");
    if (r.cancel_requested) o.add("cancel_requested", true);
    o.add("age_ms", to_millis(elapsed(r.created, now)));
    return o.str();
  }
  const status& st = r.st;
  o.add("state", to_string(st.code));
  if (st.code == outcome::deadline_exceeded) o.add("stage", to_string(st.stage));
  if (st.code == outcome::cancelled) o.add("cause", to_string(st.cause));
  if (st.code == outcome::rejected) o.add("reason", to_string(st.reason));  // circuit_open: a call it made
  if (st.code == outcome::error) {
    o.add("error", r.error_code).add("message", r.error_message).add("http_status", r.error_http);
  }
  o.add("queued_ms", to_millis(r.timings.queue_delay));
  if (r.timings.ran) o.add("run_ms", to_millis(r.timings.run_time));
  o.add("age_ms", to_millis(elapsed(r.created, now)));
  if (r.timings.committed) o.add("committed", true);
  if (st.is_ok()) {
    o.add("content_type", r.result.content_type);
    if (valid_utf8(r.result.body)) {
      o.add("result", r.result.body);
    } else {
      o.add("result_base64", support::base64(r.result.body));
    }
  }
  return o.str();
}

response async_job_response(core& c, std::string_view id, bool cancel) {
  const time_point now = c.clk.now();
  const std::string key(id);
  const std::optional<async_record> r = cancel ? c.async_jobs->cancel(key, now) : c.async_jobs->find(key, now);
  if (!r) return error_response(404, "not_found", "no such job (unknown, or expired)");
  const bool finished = r->state == async_state::finished;
  response res = make_response(cancel && !finished ? 202 : 200, async_job_json(*r, now), json_type);
  if (finished) res.set("Server-Timing", server_timing(r->timings));
  res.set(http::field::cache_control, "no-store");
  return res;
}

}  // namespace hourglass::server::detail

namespace hourglass::server::detail {

namespace {

class memory_backend final : public async_backend {
 public:
  explicit memory_backend(core& c) : c_(c) {}
  void submit(std::shared_ptr<const job_input> in, time_point headers_at, duration freshness, reply done) override {
    done(submit_async_job(c_, std::move(in), headers_at, freshness));
  }
  void lookup(std::string id, bool cancel, reply done) override { done(async_job_response(c_, id, cancel)); }
  // The store's size against its bound: what a soak watches for growth.
  void write_metrics(exposition_writer& w) const override {
    w.gauge("hourglass_async_jobs_stored", "Async jobs held (queued, running, or finished within --async-ttl).",
            c_.async_jobs->size());
  }

 private:
  core& c_;
};

}  // namespace

std::unique_ptr<async_backend> make_memory_backend(core& c) { return std::make_unique<memory_backend>(c); }

}  // namespace hourglass::server::detail
