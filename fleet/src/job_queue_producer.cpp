// The producer's side of job_queue (enqueue, find, cancel, list) and the
// script calls, each a chain of asynchronous broker calls: no thread waits on
// a round trip, and a daemon pipelines every client's calls on one
// connection. The blocking forms wait for the same chains.
#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>

#include "async_calls.hpp"
#include "hourglass/fleet/freshness.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/jobs/job_state.hpp"
#include "job_fields.hpp"
#include "scripts.hpp"

namespace hourglass::fleet {

namespace {

using detail::answer;
using detail::broker_error_ptr;
using detail::error_of;
using detail::failed;
using detail::wait_for;

bool valid_job_id(std::string_view id) noexcept {
  if (id.size() != 32) return false;
  for (const char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A number the scripts wrote ("" or not one: nullopt).
std::optional<double> number_field(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc()) return std::nullopt;
  (void)end;
  return v;
}

// The job's hash (HGETALL's field, value pairs), decoded: the one place
// fleet/ reads its field names.
fleet_job job_from(std::string_view id, const redis_reply& r) {
  namespace job_field = detail::job_field;
  fleet_job j;
  j.id = std::string(id);
  // A count: a number from 0 to T's most, else `fallback` (a NaN or a
  // negative never converts: that would be undefined).
  const auto whole = [](const std::string& v, auto fallback) {
    using T = decltype(fallback);
    const std::optional<double> n = number_field(v);
    if (!n || !(*n >= 0 && *n <= static_cast<double>(std::numeric_limits<T>::max()))) return fallback;
    return static_cast<T>(*n);
  };
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    const std::string& f = r.elements[i].str;
    std::string v = r.elements[i + 1].str;
    if (f == job_field::handler) j.handler = std::move(v);
    else if (f == job_field::state) j.state = std::move(v);
    else if (f == job_field::parent) j.parent = std::move(v);
    else if (f == job_field::children) j.child_count = whole(v, 0u);
    else if (f == job_field::idempotency_key) j.idempotency_key = std::move(v);
    else if (f == job_field::entry) j.entry = std::move(v);
    else if (f == job_field::payload) j.payload = std::move(v);
    else if (f == job_field::content_type) j.content_type = std::move(v);
    else if (f == job_field::attempt) j.attempt = std::max(whole(v, 1), 1);
    else if (f == job_field::max_attempts) j.max_attempts = std::max(whole(v, 1), 1);
    else if (f == job_field::deliveries && !v.empty()) j.deliveries = whole(v, 0u);
    else if (f == job_field::consumer) j.consumer = std::move(v);
    else if (f == job_field::attempts) j.attempts_json = std::move(v);
    else if (f == job_field::accepted_ms) j.accepted_ms = number_field(v);
    else if (f == job_field::freshness_ms) j.freshness_ms = number_field(v);
    else if (f == job_field::deadline_us) j.deadline_us = number_field(v);
    else if (f == job_field::due_ms) j.due_ms = number_field(v);
    else if (f == job_field::started_ms) j.started_ms = number_field(v);
    else if (f == job_field::starts) j.starts = std::move(v);
    else if (f == job_field::wait_rule) j.wait_rule = std::move(v);
    else if (f == job_field::wake_ms) j.wake_ms = number_field(v);
    else if (f == job_field::human_since_us) j.human_since_us = number_field(v);
    else if (f == job_field::human_waited_us) j.human_waited_us = number_field(v);
    else if (f == job_field::wakes) j.wakes = whole(v, 0);
    else if (f == job_field::woke_by) j.woke_by = std::move(v);
    else if (f == job_field::cancel_requested) j.cancel_requested = v == "1";
    else if (f == job_field::stage) j.stage = std::move(v);
    else if (f == job_field::cause) j.cause = std::move(v);
    else if (f == job_field::reason) j.reason = std::move(v);
    else if (f == job_field::error) j.error = std::move(v);
    else if (f == job_field::message) j.message = std::move(v);
    else if (f == job_field::http_status) j.http_status = whole(v, 0u);
    else if (f == job_field::queued_ms) j.queued_ms = number_field(v);
    else if (f == job_field::run_ms) j.run_ms = number_field(v);
    else if (f == job_field::committed) j.committed = v == "1";
    else if (f == job_field::result) j.result = std::move(v);
  }
  return j;
}

// A job against a listing's filters: its state ("finished": any final one;
// "retrying": scheduled for an attempt after the first) and its handler.
bool job_matches(const fleet_job& j, const list_query& q) {
  if (!q.handler.empty() && j.handler != q.handler) return false;
  const auto filter = jobs::parse_job_filter(q.state);
  if (!filter) return false;
  if (filter->k == jobs::job_filter::kind::any) return true;
  const auto state = jobs::parse_job_state(j.state);
  // retrying: scheduled for an attempt after the first (attempt names the next)
  return state && filter->matches(*state, j.attempt > 1);
}

// The index that holds a state's jobs, walked by list.lua: "" for none (the
// final states, "waiting" (a wait without a deadline is in no index) and
// "any": SCAN over the job hashes).
std::string_view index_of(std::string_view state) noexcept {
  using jobs::job_state;
  const auto filter = jobs::parse_job_filter(state);
  if (!filter) return "";
  if (filter->k == jobs::job_filter::kind::retrying) return "delayed";
  if (filter->k != jobs::job_filter::kind::one) return "";
  switch (filter->state) {
    case job_state::queued:
    case job_state::running: return "stream";
    case job_state::scheduled: return "delayed";
    case job_state::dead: return "dead";
    default: return "";
  }
}

// Digits of a number the broker takes as one: within 64 bits (SCAN's
// cursor, a stream id's halves) and, for a score (a delayed entry's due ms),
// within the 2^53 a double holds exactly. Past that the broker answered an
// error, which read as an outage (503) and was logged per request.
bool digits(std::string_view s, std::uint64_t max = UINT64_MAX) noexcept {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size() && n <= max;
}

// A cursor of the walk `index` ("" for SCAN) could have made.
bool valid_cursor(std::string_view index, std::string_view c) noexcept {
  if (c.empty()) return true;
  if (index.empty()) return digits(c);
  const char sep = index == "delayed" ? ':' : '-';
  const auto at = c.find(sep);
  if (at == std::string_view::npos || !digits(c.substr(0, at), sep == ':' ? std::uint64_t{1} << 53 : UINT64_MAX)) {
    return false;
  }
  return sep == ':' ? valid_job_id(c.substr(at + 1)) : digits(c.substr(at + 1));
}

}  // namespace

// ---- scripts: EVALSHA, loading the script where the broker lacks it ----

namespace {

// Each script's SHA1, remembered for the whole process: it is a function of
// the text alone, the same on every broker, so a job_queue made for one call
// (or one more broker) does not load the scripts again. A broker that lacks
// a script (new, restarted, flushed) answers NOSCRIPT and the call loads it.
class script_shas {
 public:
  static std::string of(std::string_view script) {
    std::lock_guard lock(mu());
    const auto it = map().find(script.data());
    return it == map().end() ? std::string() : it->second;
  }
  static void remember(std::string_view script, const std::string& sha) {
    std::lock_guard lock(mu());
    map()[script.data()] = sha;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  // Keyed by the text's address: the scripts are the generated constants.
  static std::map<const char*, std::string>& map() {
    static std::map<const char*, std::string> m;
    return m;
  }
};

}  // namespace

struct job_queue::eval_call {
  redis_client* redis;  // outlives the queue: a call in flight needs nothing of the queue
  context ctx;
  std::string_view script;
  std::vector<std::string> keys, args;
  answer_fn<redis_reply> done;
  int loads = 0;     // SCRIPT LOADs so far: a broker that keeps forgetting is an error
  int replicas = 0;  // > 0: a WAIT behind it must find this many replicas holding it, or it failed
  duration replica_timeout{};
};

void job_queue::async_eval(const context& ctx, detail::script_call sc, answer_fn<redis_reply> done, bool replicated) {
  auto call = std::make_shared<eval_call>(
      eval_call{&redis_, ctx, sc.script, std::move(sc.keys), std::move(sc.args), std::move(done)});
  if (replicated) {
    call->replicas = static_cast<int>(options_.replicas);
    call->replica_timeout = options_.replica_timeout;
  }
  send_eval(std::move(call));
}

void job_queue::send_eval(std::shared_ptr<eval_call> call) {
  std::string sha = script_shas::of(call->script);
  if (sha.empty()) return load_script(std::move(call));
  std::vector<std::string> cmd{"EVALSHA", std::move(sha), std::to_string(call->keys.size())};
  cmd.insert(cmd.end(), call->keys.begin(), call->keys.end());
  cmd.insert(cmd.end(), call->args.begin(), call->args.end());
  auto answered = [call](redis_result r) {
    if (auto e = error_of(r)) return call->done(failed<redis_reply>(std::move(e)));
    if (r.reply.is_error() && r.reply.str.rfind("NOSCRIPT", 0) == 0) return load_script(call);
    if (r.reply.is_error()) return call->done(failed<redis_reply>(detail::script_refused_ptr(r.reply)));
    if (call->replicas > 0 && r.replicas < call->replicas) {
      // Held by the master alone, which may lose it in a failover: not the promise asked for.
      return call->done(failed<redis_reply>(std::make_exception_ptr(redis_unavailable(
          "redis: the write reached " + std::to_string(std::max(r.replicas, 0LL)) + " of " +
          std::to_string(call->replicas) + " replicas within " + detail::millis(call->replica_timeout) + " ms"))));
    }
    call->done(answer(std::move(r.reply)));
  };
  if (call->replicas > 0) {
    return call->redis->async_call_replicated(call->ctx, std::move(cmd), std::move(answered), call->replicas,
                                              call->replica_timeout);
  }
  call->redis->async_call(call->ctx, std::move(cmd), std::move(answered));
}

void job_queue::load_script(std::shared_ptr<eval_call> call) {
  if (++call->loads > 2) {
    return call->done(failed<redis_reply>(
        std::make_exception_ptr(redis_unavailable("redis: the broker keeps forgetting our scripts"))));
  }
  // On a cluster, loaded on the node the script's keys live on (each node keeps its own scripts).
  const std::string route = call->keys.empty() ? std::string() : call->keys.front();
  call->redis->async_call(
      call->ctx, {"SCRIPT", "LOAD", std::string(call->script)},
      [call](redis_result r) {
        if (auto e = error_of(r)) return call->done(failed<redis_reply>(std::move(e)));
        if (!r.reply.is_string()) return call->done(failed<redis_reply>(broker_error_ptr("SCRIPT LOAD", r.reply)));
        script_shas::remember(call->script, r.reply.str);
        send_eval(call);
      },
      false, route);
}

redis_reply job_queue::eval(const context& ctx, const detail::script_call& call) {
  return wait_for<redis_reply>([&](answer_fn<redis_reply> done) { async_eval(ctx, call, std::move(done)); });
}

void job_queue::async_ensure_group(const context& ctx, answer_fn<bool> done) {
  redis_.async_call(ctx, {"XGROUP", "CREATE", key("stream"), std::string(group), "0", "MKSTREAM"},
                    [done = std::move(done)](redis_result r) {
                      if (auto e = error_of(r)) return done(failed<bool>(std::move(e)));
                      if (r.reply.is_error() && r.reply.str.rfind("BUSYGROUP", 0) != 0) {
                        return done(failed<bool>(broker_error_ptr("XGROUP CREATE", r.reply)));
                      }
                      done(answer(true));
                    });
}

// ---- a job by id ----

void job_queue::async_find(const context& ctx, std::string id, answer_fn<std::optional<fleet_job>> done) {
  if (!valid_job_id(id)) return done(answer(std::optional<fleet_job>()));
  const std::string k = key("job:" + id);
  std::string children_key = key("children:" + id);
  redis_.async_call(ctx, {"HGETALL", k},
                    [&redis = redis_, ctx, children_key = std::move(children_key), id = std::move(id),
                     done = std::move(done)](redis_result r) mutable {
                      if (auto e = error_of(r)) return done(failed<std::optional<fleet_job>>(std::move(e)));
                      if (!r.reply.is_array())
                        return done(failed<std::optional<fleet_job>>(broker_error_ptr("HGETALL", r.reply)));
                      if (r.reply.elements.empty()) return done(answer(std::optional<fleet_job>()));
                      fleet_job j = job_from(id, r.reply);
                      if (j.child_count == 0) return done(answer(std::optional<fleet_job>(std::move(j))));
                      // A parent: its children's ids too (the sorted set enqueue writes beside it).
                      redis.async_call(ctx, {"ZRANGE", std::move(children_key), "0", "-1"},
                                       [j = std::move(j), done = std::move(done)](redis_result c) mutable {
                                         if (auto e = error_of(c)) return done(failed<std::optional<fleet_job>>(e));
                                         // in the order sent (the set's scores)
                                         for (const redis_reply& m : c.reply.elements) j.children.push_back(m.str);
                                         done(answer(std::optional<fleet_job>(std::move(j))));
                                       });
                    });
}

std::optional<fleet_job> job_queue::find(const context& ctx, std::string_view id) {
  return wait_for<std::optional<fleet_job>>(
      [&](answer_fn<std::optional<fleet_job>> done) { async_find(ctx, std::string(id), std::move(done)); });
}

void job_queue::async_cancel(const context& ctx, std::string id, answer_fn<cancelled_job> done, cancel_cause cause) {
  if (!valid_job_id(id)) return done(answer(cancelled_job{}));
  // (encoded first: the callback below takes `id`)
  detail::script_call call = detail::encode_cancel(keys(), id, options_.result_ttl, cause);
  async_eval(ctx, std::move(call),
             [this, ctx, id = std::move(id), done = std::move(done)](async_answer<redis_reply> r) mutable {
               if (r.error) return done(failed<cancelled_job>(r.error));
               const detail::cancel_reply c = detail::decode_cancel(r.value);
               if (c == detail::cancel_reply::unknown) return done(answer(cancelled_job{}));
               const bool here = c == detail::cancel_reply::cancelled;
               async_find(ctx, std::move(id),
                          [here, family = detail::decode_cancelled_family(r.value),
                           done = std::move(done)](async_answer<std::optional<fleet_job>> j) mutable {
                            if (j.error) return done(failed<cancelled_job>(j.error));
                            done(answer(cancelled_job{std::move(j.value), here, std::move(family)}));
                          });
             });
}

void job_queue::async_signal(const context& ctx, std::string id, std::string name, std::string payload,
                             answer_fn<signal_answer> done) {
  if (!valid_job_id(id)) return done(answer(signal_answer{}));
  detail::script_call call = detail::encode_signal(keys(), id, std::move(name), std::move(payload),
                                                   options_.result_ttl);
  async_eval(ctx, std::move(call),
             [this, ctx, id = std::move(id), done = std::move(done)](async_answer<redis_reply> r) mutable {
               if (r.error) return done(failed<signal_answer>(r.error));
               signal_answer s;
               try {
                 s = detail::decode_signal(r.value);
               } catch (const redis_unavailable&) {
                 return done(failed<signal_answer>(std::current_exception()));
               }
               if (s.verdict == signal_answer::kind::unknown) return done(answer(std::move(s)));
               async_find(ctx, std::move(id),
                          [s = std::move(s), done = std::move(done)](async_answer<std::optional<fleet_job>> j) mutable {
                            if (j.error) return done(failed<signal_answer>(j.error));
                            s.job = std::move(j.value);
                            done(answer(std::move(s)));
                          });
             });
}

std::optional<fleet_job> job_queue::cancel(const context& ctx, std::string_view id, bool* cancelled_here) {
  cancelled_job c = wait_for<cancelled_job>(
      [&](answer_fn<cancelled_job> done) { async_cancel(ctx, std::string(id), std::move(done)); });
  if (cancelled_here != nullptr) *cancelled_here = c.cancelled_here;
  return std::move(c.job);
}

// ---- jobs by state: ids along an index (list.lua) or SCAN, then each hash ----

namespace {

// Reads the hashes of `ids` in one pipeline and keeps those matching `q`, in
// the order of `ids`: the page, with `next_cursor`.
void fetch_page(job_queue& queue, const context& ctx, std::vector<std::string> ids, list_query q,
                std::string next_cursor, answer_fn<job_list> done) {
  if (ids.empty()) return done(answer(job_list{{}, std::move(next_cursor)}));
  struct gather {
    std::mutex mu;
    std::vector<std::optional<fleet_job>> jobs;
    list_query q;
    std::string next_cursor;
    std::size_t waiting = 0;
    std::exception_ptr error;
    answer_fn<job_list> done;
  };
  auto g = std::make_shared<gather>();
  g->jobs.resize(ids.size());
  g->q = std::move(q);
  g->next_cursor = std::move(next_cursor);
  g->waiting = ids.size();
  g->done = std::move(done);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    queue.async_find(ctx, std::move(ids[i]), [g, i](async_answer<std::optional<fleet_job>> j) {
      std::unique_lock lock(g->mu);
      if (j.error) g->error = j.error;
      if (!j.error && j.value && job_matches(*j.value, g->q)) g->jobs[i] = std::move(j.value);
      if (--g->waiting != 0) return;
      lock.unlock();
      if (g->error) return g->done(failed<job_list>(g->error));
      job_list list;
      list.next_cursor = std::move(g->next_cursor);
      for (auto& job : g->jobs) {
        if (job) list.jobs.push_back(std::move(*job));
      }
      g->done(answer(std::move(list)));
    });
  }
}

}  // namespace

bool listed_by_scan(std::string_view state) noexcept { return index_of(state).empty(); }

void job_queue::async_list(const context& ctx, list_query q, answer_fn<job_list> done) {
  const std::string_view index = index_of(q.state);
  if (!valid_cursor(index, q.cursor)) return done(answer(job_list{.invalid_cursor = true}));
  // (encoded first: the callback below takes `q`)
  detail::script_call call = detail::encode_list(keys(), index, q.cursor, q.count, q.state);
  async_eval(ctx, std::move(call),
             [this, ctx, q = std::move(q), done = std::move(done)](async_answer<redis_reply> r) mutable {
               if (r.error) return done(failed<job_list>(r.error));
               detail::list_page page;
               try {
                 page = detail::decode_list(r.value);
               } catch (...) {
                 return done(failed<job_list>(std::current_exception()));
               }
               fetch_page(*this, ctx, std::move(page.ids), std::move(q), std::move(page.next_cursor), std::move(done));
             });
}

namespace {

// A script's reply read by `decode` for `done`: the broker's error, or the
// decoder's (a reply of the wrong shape), fails it.
template <class T, class Decode>
answer_fn<redis_reply> decoded(answer_fn<T> done, Decode decode) {
  return [done = std::move(done), decode](async_answer<redis_reply> r) {
    if (r.error) return done(failed<T>(r.error));
    try {
      done(answer(decode(r.value)));
    } catch (...) {
      done(failed<T>(std::current_exception()));
    }
  };
}

answer_fn<redis_reply> dead_reply(answer_fn<dead_answer> done) { return decoded(std::move(done), detail::decode_dead); }

}  // namespace

void job_queue::async_queue_state(const context& ctx, queue_op op, answer_fn<queue_state> done) {
  async_eval(ctx, detail::encode_queue(keys(), op), decoded(std::move(done), detail::decode_queue));
}

void job_queue::async_replay(const context& ctx, std::string id, duration freshness, duration min_budget,
                             bool admission, answer_fn<dead_answer> done) {
  if (!valid_job_id(id)) return done(answer(dead_answer{}));
  async_eval(ctx, detail::encode_dead_replay(keys(), id, freshness, min_budget, admission),
             dead_reply(std::move(done)));
}

void job_queue::async_delete_dead(const context& ctx, std::string id, answer_fn<dead_answer> done) {
  if (!valid_job_id(id)) return done(answer(dead_answer{}));
  async_eval(ctx, detail::encode_dead_delete(keys(), id), dead_reply(std::move(done)));
}

void job_queue::async_purge_dead(const context& ctx, std::size_t count, answer_fn<purged> done) {
  async_eval(ctx, detail::encode_dead_purge(keys(), count), decoded(std::move(done), detail::decode_purge));
}

job_list job_queue::list(const context& ctx, const list_query& q) {
  return wait_for<job_list>([&](answer_fn<job_list> done) { async_list(ctx, q, std::move(done)); });
}

}  // namespace hourglass::fleet
