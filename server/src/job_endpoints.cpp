#include "job_endpoints.hpp"

#include "core.hpp"
#include "job_input.hpp"

namespace hourglass::server::detail {

namespace http = boost::beast::http;

namespace {

response store_unavailable() {
  response res = error_response(503, "broker_unavailable", "the job broker cannot be reached; nothing was accepted");
  res.set(http::field::retry_after, "1");
  return res;
}

}  // namespace

response response_of(core& c, const new_job& job, const created& r) {
  switch (r.verdict) {
    case created::kind::accepted: return accepted_response(r.job, false);
    case created::kind::duplicate: return accepted_response(r.job, true);
    case created::kind::invalid: return error_response(400, r.error, r.message);
    case created::kind::refused: break;
  }
  const status& st = r.refusal;
  response answer = st.code == outcome::rejected && st.reason == reject_reason::broker_unavailable
                        ? store_unavailable()
                        : job_response(st, {}, r.budget, r.remaining, nullptr, nullptr);
  if (r.booked) return answer;
  return c.refuse({*job.in->entry, "async", st, duration::max(), r.note}, std::move(answer));
}

response response_of(const found& r, bool cancel) {
  switch (r.verdict) {
    case found::kind::found: return job_view_response(r.job, cancel);
    case found::kind::not_found: return error_response(404, "not_found", "no such job (unknown, or expired)");
    case found::kind::unavailable: break;
  }
  return store_unavailable();
}

void submit_async_job(core& c, new_job job, answer_fn done) {
  auto kept = std::make_shared<new_job>(job);
  c.store->create(std::move(job), [&c, kept, done = std::move(done)](created r) { done(response_of(c, *kept, r)); });
}

void answer_job_lookup(core& c, std::string id, bool cancel, answer_fn done) {
  auto reply = [cancel, done = std::move(done)](found r) { done(response_of(r, cancel)); };
  if (cancel) return c.store->cancel(std::move(id), std::move(reply));
  c.store->find(std::move(id), std::move(reply));
}

}  // namespace hourglass::server::detail
