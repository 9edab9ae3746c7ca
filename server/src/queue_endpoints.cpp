#include "queue_endpoints.hpp"

#include "core.hpp"
#include "responses.hpp"

namespace hourglass::server::detail {

namespace http = boost::beast::http;

void answer_queue(core& c, std::string_view name, queue_action a, answer_fn done) {
  if (!name.empty() && name != c.opts.queue) return done(error_response(404, "not_found", "no such queue"));
  const bool list = name.empty();
  c.store->queue_state(a, [list, done = std::move(done)](queue_answer q) {
    if (q.unavailable) {
      response res = error_response(503, "broker_unavailable", "the job broker cannot be reached");
      res.set(http::field::retry_after, "1");
      return done(std::move(res));
    }
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

}  // namespace hourglass::server::detail
