#include "http/queue_endpoints.hpp"

#include <boost/url/decode_view.hpp>
#include <boost/url/pct_string_view.hpp>

#include "core/core.hpp"
#include "core/job_view.hpp"
#include "hourglass/support/json.hpp"
#include "http/job_listing.hpp"
#include "http/responses.hpp"

namespace hourglass::server::detail {

namespace http = boost::beast::http;

namespace {

// The {name} of a path names this daemon's queue once percent-decoded (the
// page and the hourglass command encode a name, "a%2Bb" for "a+b").
bool names_our_queue(std::string_view segment, const std::string& queue) {
  const auto pct = boost::urls::make_pct_string_view(segment);
  return pct.has_value() && **pct == std::string_view(queue);
}

}  // namespace

void answer_queue(core& c, std::string_view name, queue_action a, answer_fn done) {
  if (!name.empty() && !names_our_queue(name, c.opts.queue)) {
    return done(error_response(404, "not_found", "no such queue"));
  }
  const bool list = name.empty();
  c.store->queue_state(a, [list, done = std::move(done)](queue_answer q) {
    if (q.unavailable) return done(broker_unavailable_response());
    if (q.pause_unsupported) {
      return done(error_response(409, "pause_unsupported",
                                 "only a fleet's queue (--broker) can be paused: in memory, the executor takes "
                                 "each job as it comes"));
    }
    std::string body = queue_json(q.view);
    if (list) {
      while (!body.empty() && body.back() == '\n') body.pop_back();
      body = "{\"queues\": [" + body + "]}\n";
    }
    response res = make_response(200, std::move(body), json_type);
    res.set(http::field::cache_control, "no-store");
    done(std::move(res));
  });
}

namespace {

// The answer to a dead-letter action that did not happen.
response dead_refusal(const dead_result& r) {
  switch (r.verdict) {
    case dead_result::kind::not_dead:
      return error_response(409, "not_dead", "the job is " + r.state + ": only a dead job is replayed or deleted");
    case dead_result::kind::not_found: return error_response(404, "not_found", "no such job (unknown, or expired)");
    case dead_result::kind::unsupported:
      return error_response(409, "dead_letter_unsupported",
                            "only a fleet (--broker) dead-letters jobs: this daemon has none");
    case dead_result::kind::unavailable: return broker_unavailable_response();
    case dead_result::kind::refused:
    case dead_result::kind::done: break;
  }
  return error_response(500, "internal", "unexpected dead-letter answer");
}

}  // namespace

void answer_replay(core& c, std::string id, duration freshness, answer_fn done) {
  c.store->replay_dead(std::move(id), freshness, [done = std::move(done)](dead_result r) {
    if (r.verdict == dead_result::kind::done) return done(accepted_response(r.job, false));
    if (r.verdict == dead_result::kind::refused) {
      // As an enqueue refused at admission: nothing was queued to expire.
      const duration left = r.predicted_wait && *r.predicted_wait < r.budget ? r.budget - *r.predicted_wait
                                                                             : duration::zero();
      return done(job_response(status::expired(expiry_stage::admission), {}, r.budget, left, nullptr, nullptr));
    }
    done(dead_refusal(r));
  });
}

void answer_delete_dead(core& c, std::string_view queue, std::string id, answer_fn done) {
  if (!names_our_queue(queue, c.opts.queue)) return done(error_response(404, "not_found", "no such queue"));
  c.store->delete_dead(std::move(id), [done = std::move(done)](dead_result r) {
    if (r.verdict != dead_result::kind::done) return done(dead_refusal(r));
    done(make_response(200, "{\"deleted\": 1}\n", json_type));
  });
}

void answer_purge_dead(core& c, std::string_view queue, std::string_view target, answer_fn done) {
  if (!names_our_queue(queue, c.opts.queue)) return done(error_response(404, "not_found", "no such queue"));
  const purge_reading q = read_purge_query(target);
  if (!q.error.empty()) return done(error_response(400, "invalid_query", q.error));
  c.store->purge_dead(q.limit, [done = std::move(done)](dead_result r) {
    if (r.verdict != dead_result::kind::done) return done(dead_refusal(r));
    support::json_object o;
    o.add("purged", r.purged).add("entries", r.entries).add("left", r.left);
    done(make_response(200, o.str(), json_type));
  });
}

void answer_replay_dead_bulk(core& c, std::string_view queue, std::string_view target, duration freshness,
                             answer_fn done) {
  if (!names_our_queue(queue, c.opts.queue)) return done(error_response(404, "not_found", "no such queue"));
  const purge_reading q = read_purge_query(target, "a bulk replay queues many jobs at once: add confirm=yes");
  if (!q.error.empty()) return done(error_response(400, "invalid_query", q.error));
  c.store->replay_oldest_dead(q.limit, freshness, [done = std::move(done)](dead_result r) {
    if (r.verdict != dead_result::kind::done && r.verdict != dead_result::kind::refused) return done(dead_refusal(r));
    support::json_object o;
    o.add("replayed", r.replayed).add("refused", r.verdict == dead_result::kind::refused).add("skipped", r.skipped);
    o.add("left", r.left);
    done(make_response(200, o.str(), json_type));
  });
}

}  // namespace hourglass::server::detail
