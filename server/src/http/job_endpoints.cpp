#include "http/job_endpoints.hpp"

#include <algorithm>
#include <variant>

#include "core/core.hpp"
#include "core/person_wait.hpp"
#include "hourglass/support/json.hpp"
#include "http/bulk_jobs.hpp"
#include "http/job_listing.hpp"

namespace hourglass::server::detail {

namespace http = boost::beast::http;

response response_of(core& c, const new_job& job, const created& r) {
  switch (r.verdict) {
    case created::kind::accepted: return accepted_response(r.job, false);
    case created::kind::duplicate: return accepted_response(r.job, true);
    case created::kind::invalid: return error_response(r.http_status, r.error, r.message);
    case created::kind::refused: break;
  }
  const status& st = r.refusal;
  response answer = st.code == outcome::rejected && st.reason == reject_reason::broker_unavailable
                        ? broker_unavailable_response(true)
                        : job_response(st, {}, r.budget, r.remaining, nullptr, nullptr);
  if (r.booked) return answer;
  return refuse(c, {*job.in->entry, "async", st, duration::max(), r.note}, std::move(answer));
}

response response_of(const found& r, bool cancel) {
  switch (r.verdict) {
    case found::kind::found: return job_view_response(r.job, cancel);
    case found::kind::not_found: return error_response(404, "not_found", "no such job (unknown, or expired)");
    case found::kind::unavailable: break;
  }
  return broker_unavailable_response(true);
}

std::optional<terms_error> read_job_terms(const core& c, const http::fields& headers, const handler_entry& e,
                                          new_job& job) {
  const job_retry_reading retry = read_job_retry(headers, e.retry, c.opts.max_delay);
  if (!retry.ok) return terms_error{retry.error, retry.message};
  const auto wall_now = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  const job_delay_reading delay = read_job_delay(headers, c.opts.max_delay, wall_now);
  if (!delay.ok) return terms_error{"invalid_delay", delay.message};
  const std::string_view parent = headers[job_parent_header];
  if (headers.count(job_parent_header) > 1 || (headers.count(job_parent_header) == 1 && !is_job_id(parent))) {
    return terms_error{"invalid_parent", "Job-Parent is not a job id (32 lower-case hex digits), or appears twice"};
  }
  job.parent = std::string(parent);
  job.retry = retry.policy;
  job.deadline = retry.deadline == duration::max() ? never : saturating_add(job.headers_at, retry.deadline);
  job.delay = delay.delay;
  job.not_before = delay.not_before;
  return std::nullopt;
}

void submit_async_job(core& c, new_job job, answer_fn done) {
  auto kept = std::make_shared<new_job>(job);
  c.store->create(std::move(job), [&c, kept, done = std::move(done)](created r) { done(response_of(c, *kept, r)); });
}

std::optional<created> idempotency_key_refusal(const job_input& in) {
  if (!in.idempotency_key) return std::nullopt;
  const std::string& key = *in.idempotency_key;
  const bool printable = std::all_of(key.begin(), key.end(), [](char ch) { return ch >= 0x20 && ch <= 0x7e; });
  if (!key.empty() && key.size() <= 128 && printable) return std::nullopt;
  created bad;
  bad.verdict = created::kind::invalid;
  bad.error = "invalid_idempotency_key";
  bad.message = "Idempotency-Key must be 1-128 printable ASCII";
  return bad;
}

created parent_refusal(parent_problem why) {
  created c;
  c.verdict = created::kind::invalid;
  c.http_status = 409;
  switch (why) {
    case parent_problem::unknown:
      c.http_status = 400;
      c.error = "invalid_parent";
      c.message = "Job-Parent names no job this queue holds (unknown, or its record expired)";
      break;
    case parent_problem::finished:
      c.error = "parent_finished";
      c.message = "Job-Parent names a job that has finished: its children would outlive it";
      break;
    case parent_problem::too_deep:
      c.error = "too_deep";
      c.message = "Job-Parent names a job as deep in its family as --max-job-depth allows: it may have no children";
      break;
    case parent_problem::too_many_children:
      c.error = "too_many_children";
      c.message = "Job-Parent names a job that has as many children as --max-children allows";
      break;
  }
  return c;
}

void job_store::create_bulk(std::vector<new_job> jobs, callback<std::vector<created>> done) {
  if (jobs.empty()) return done({});
  auto gather = std::make_shared<created_gather>(jobs.size(), std::move(done));
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    create(std::move(jobs[i]), [gather, i](created r) { gather->put(i, std::move(r)); });
  }
}

void read_request_head(job_input& in, request_head head) {
  in.content_type = std::string((*head)[http::field::content_type]);
  if (head->count("Idempotency-Key") != 0) in.idempotency_key = std::string((*head)["Idempotency-Key"]);
  in.traceparent = std::string((*head)["traceparent"]);
  in.other_header = [head = std::move(head)](std::string_view name) -> std::string_view { return (*head)[name]; };
}

namespace {

// One job of a bulk request as a request of its own: the bulk request's
// headers (traceparent, Authorization, anything a handler reads), with the
// job's payload, Content-Type and Idempotency-Key.
std::shared_ptr<job_input> input_of(const bulk_submission& s, const request_head& head, const handler_entry& e,
                                    bulk_item& item) {
  auto in = std::make_shared<job_input>();
  read_request_head(*in, head);
  in->content_type = std::move(item.content_type);
  in->idempotency_key = std::move(item.idempotency_key);
  in->body = std::move(item.payload);
  in->entry = &e;
  in->async = true;
  in->remote = s.remote;
  const job_bounds bounds = bounds_of_job(true, {}, e.run_limit, e.idle_limit, s.idle_limit);
  in->budget = bounds.budget;
  in->idle_limit = bounds.idle_limit;
  return in;
}

}  // namespace

void submit_bulk_jobs(core& c, bulk_submission s, answer_fn done) {
  bulk_reading reading = read_bulk_body(s.msg.body());
  if (!reading.ok) return done(error_response(400, "invalid_bulk", reading.message));
  const request_head head = std::make_shared<const http::request_header<>>(s.msg.base());
  struct pending {
    std::vector<bulk_answer> answers;
    std::vector<new_job> jobs;       // what went to the store, and
    std::vector<std::size_t> where;  // each one's place in `answers`
  };
  auto p = std::make_shared<pending>();
  p->answers.resize(reading.items.size());
  for (std::size_t i = 0; i < reading.items.size(); ++i) {
    bulk_item& item = reading.items[i];
    const handler_entry* e = item.error.empty() ? c.find_handler(item.handler) : nullptr;
    if (!item.error.empty()) {
      p->answers[i] = {400, error_response(400, item.error, item.message).body()};
    } else if (e == nullptr) {
      p->answers[i] = {404, error_response(404, "not_found", "no such handler").body()};
    } else {
      new_job job;
      job.headers_at = s.headers_at;
      job.freshness = item.freshness ? std::min(*item.freshness, c.opts.max_budget) : s.freshness;
      if (const std::optional<terms_error> bad = read_job_terms(c, s.msg, *e, job)) {
        // Booked under its handler as the same job POSTed alone would be.
        const response r = refuse(c, {*e, "async", status::invalid(), duration::max(), bad->error},
                                  error_response(400, bad->error, bad->message));
        p->answers[i] = {400, r.body()};
        continue;
      }
      job.in = input_of(s, head, *e, item);
      p->jobs.push_back(std::move(job));
      p->where.push_back(i);
    }
  }
  auto finish = [p, done = std::move(done)] { done(make_response(200, bulk_response_body(p->answers), json_type)); };
  if (p->jobs.empty()) return finish();
  std::vector<new_job> jobs = p->jobs;  // the store takes its own; `p` keeps them for the answers
  c.store->create_bulk(std::move(jobs), [&c, p, finish = std::move(finish)](std::vector<created> rs) {
    for (std::size_t k = 0; k < rs.size(); ++k) {
      const response r = response_of(c, p->jobs[k], rs[k]);
      p->answers[p->where[k]] = {r.result_int(), r.body()};
    }
    finish();
  });
}

void answer_job_list(core& c, std::string_view target, answer_fn done) {
  auto q = read_list_query(target);
  if (const auto* bad = std::get_if<list_query_error>(&q))
    return done(error_response(400, "invalid_query", bad->message));
  c.store->list(std::move(std::get<list_request>(q)), [done = std::move(done)](job_page page) {
    if (page.unavailable) return done(broker_unavailable_response());
    if (page.invalid_cursor) return done(error_response(400, "invalid_cursor", "not a cursor of this state's walk"));
    if (page.too_many) {
      response res = error_response(429, "too_many_listings",
                                    "listings of this state read the whole broker; past --max-list-scans a second");
      res.set(http::field::retry_after, "1");
      return done(std::move(res));
    }
    response res = make_response(200, job_page_json(page), json_type);
    res.set(http::field::cache_control, "no-store");
    done(std::move(res));
  });
}

response response_of(const signal_result& r) {
  switch (r.verdict) {
    case signal_result::kind::delivered: return job_view_response(r.job, false);
    case signal_result::kind::not_waiting: {
      const std::string waits = r.job.waiting_for.empty() ? "it waits for no signal"
                                                          : "it waits for " + r.job.waiting_for;
      response res = make_response(409,
                                   support::json_object()
                                       .add("error", "not_waiting")
                                       .add("message", "not delivered: the job is " + r.job.state + "; " + waits)
                                       .add("state", r.job.state)
                                       .str(),
                                   json_type);
      return res;
    }
    case signal_result::kind::not_found: return error_response(404, "not_found", "no such job (unknown, or expired)");
    case signal_result::kind::unavailable: break;
  }
  return broker_unavailable_response(true);
}

void answer_signal(core& c, std::string id, std::string name, std::string payload, answer_fn done) {
  if (!valid_signal_name(name)) {
    return done(error_response(400, "invalid_signal", "a signal's name is 1 to 64 of [A-Za-z0-9._-]"));
  }
  if (payload.size() > max_signal_payload) {
    return done(error_response(413, "payload_too_large", "a signal's payload is at most 64 KiB"));
  }
  c.store->signal(std::move(id), std::move(name), std::move(payload),
                  [done = std::move(done)](signal_result r) { done(response_of(r)); });
}

void answer_job_lookup(core& c, std::string id, bool cancel, answer_fn done) {
  auto reply = [cancel, done = std::move(done)](found r) { done(response_of(r, cancel)); };
  if (cancel) return c.store->cancel(std::move(id), cancel_cause::requested, std::move(reply));
  c.store->find(std::move(id), std::move(reply));
}

response job_view_response(const job_view& j, bool cancel) {
  const bool finished = j.finished();
  response res = make_response(cancel && !finished ? 202 : 200, job_json(j), json_type);
  if (finished) res.set("Server-Timing", server_timing(j.timings()));
  res.set(http::field::cache_control, "no-store");
  return res;
}

response accepted_response(const job_view& j, bool duplicate) {
  const std::string location = std::string(jobs_path) + j.id;
  support::json_object body;
  body.add("id", j.id).add("state", j.state).add("location", location);
  if (duplicate) body.add("duplicate", true);
  response res = make_response(202, body.str(), json_type);
  res.set(http::field::location, location);
  res.set("Server-Timing", server_timing({}));  // nothing spent yet; GET reports the job's own
  return res;
}

}  // namespace hourglass::server::detail
