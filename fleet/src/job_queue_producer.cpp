// The producer's side of job_queue (enqueue, find, cancel, list) and the
// script calls, each a chain of asynchronous broker calls: no thread waits on
// a round trip, and a daemon pipelines every client's calls on one
// connection. The blocking forms wait for the same chains.
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>

#include "async_calls.hpp"
#include "hourglass/fleet/freshness.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "scripts.hpp"

namespace hourglass::fleet {

namespace {

using detail::answer;
using detail::broker_error_ptr;
using detail::error_of;
using detail::failed;
using detail::millis;
using detail::wait_for;

bool valid_job_id(std::string_view id) noexcept {
  if (id.size() != 32) return false;
  for (const char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

fleet_job job_from(std::string_view id, const redis_reply& r) {
  fleet_job j;
  j.id = std::string(id);
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) j.fields[r.elements[i].str] = r.elements[i + 1].str;
  return j;
}

// A job's state against a listing's filter.
bool state_matches(std::string_view state, std::string_view filter) {
  if (filter.empty()) return true;
  if (filter == "finished") return !state.empty() && state != "queued" && state != "running";
  return state == filter;
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
  redis_connection* redis;  // outlives the queue: a call in flight needs nothing of the queue
  context ctx;
  std::string_view script;
  std::vector<std::string> keys, args;
  answer_fn<redis_reply> done;
  int loads = 0;  // SCRIPT LOADs so far: a broker that keeps forgetting is an error
};

void job_queue::async_eval(const context& ctx, std::string_view script, std::vector<std::string> keys,
                           std::vector<std::string> args, answer_fn<redis_reply> done) {
  send_eval(
      std::make_shared<eval_call>(eval_call{&redis_, ctx, script, std::move(keys), std::move(args), std::move(done)}));
}

void job_queue::send_eval(std::shared_ptr<eval_call> call) {
  std::string sha = script_shas::of(call->script);
  if (sha.empty()) return load_script(std::move(call));
  std::vector<std::string> cmd{"EVALSHA", std::move(sha), std::to_string(call->keys.size())};
  cmd.insert(cmd.end(), call->keys.begin(), call->keys.end());
  cmd.insert(cmd.end(), call->args.begin(), call->args.end());
  call->redis->async_call(call->ctx, std::move(cmd), [call](redis_result r) {
    if (auto e = error_of(r)) return call->done(failed<redis_reply>(e));
    if (r.reply.is_error() && r.reply.str.rfind("NOSCRIPT", 0) == 0) return load_script(call);
    if (r.reply.is_error()) return call->done(failed<redis_reply>(broker_error_ptr("script", r.reply)));
    call->done(answer(std::move(r.reply)));
  });
}

void job_queue::load_script(std::shared_ptr<eval_call> call) {
  if (++call->loads > 2) {
    return call->done(failed<redis_reply>(
        std::make_exception_ptr(redis_unavailable("redis: the broker keeps forgetting our scripts"))));
  }
  call->redis->async_call(call->ctx, {"SCRIPT", "LOAD", std::string(call->script)}, [call](redis_result r) {
    if (auto e = error_of(r)) return call->done(failed<redis_reply>(e));
    if (!r.reply.is_string()) return call->done(failed<redis_reply>(broker_error_ptr("SCRIPT LOAD", r.reply)));
    script_shas::remember(call->script, r.reply.str);
    send_eval(call);
  });
}

redis_reply job_queue::eval(const context& ctx, std::string_view script, const std::vector<std::string>& keys,
                            const std::vector<std::string>& args) {
  return wait_for<redis_reply>(
      [&](answer_fn<redis_reply> done) { async_eval(ctx, script, keys, args, std::move(done)); });
}

void job_queue::async_ensure_group(const context& ctx, answer_fn<bool> done) {
  redis_.async_call(ctx, {"XGROUP", "CREATE", key("stream"), std::string(group), "0", "MKSTREAM"},
                    [done = std::move(done)](redis_result r) {
                      if (auto e = error_of(r)) return done(failed<bool>(e));
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
  redis_.async_call(ctx, {"HGETALL", k}, [id = std::move(id), done = std::move(done)](redis_result r) {
    if (auto e = error_of(r)) return done(failed<std::optional<fleet_job>>(e));
    if (!r.reply.is_array()) return done(failed<std::optional<fleet_job>>(broker_error_ptr("HGETALL", r.reply)));
    if (r.reply.elements.empty()) return done(answer(std::optional<fleet_job>()));
    done(answer(std::optional<fleet_job>(job_from(id, r.reply))));
  });
}

std::optional<fleet_job> job_queue::find(const context& ctx, std::string_view id) {
  return wait_for<std::optional<fleet_job>>(
      [&](answer_fn<std::optional<fleet_job>> done) { async_find(ctx, std::string(id), std::move(done)); });
}

void job_queue::async_cancel(const context& ctx, std::string id, answer_fn<cancelled_job> done) {
  if (!valid_job_id(id)) return done(answer(cancelled_job{}));
  std::vector<std::string> keys{key("stream"), key("job:" + id), key("delayed")};
  std::vector<std::string> args{std::string(group),
                                millis(std::max<duration>(options_.result_ttl, std::chrono::milliseconds(1)))};
  async_eval(ctx, detail::cancel_script, std::move(keys), std::move(args),
             [this, ctx, id = std::move(id), done = std::move(done)](async_answer<redis_reply> r) mutable {
               if (r.error) return done(failed<cancelled_job>(r.error));
               const detail::cancel_reply c = detail::decode_cancel(r.value);
               if (c == detail::cancel_reply::unknown) return done(answer(cancelled_job{}));
               const bool here = c == detail::cancel_reply::cancelled;
               async_find(ctx, std::move(id), [here, done = std::move(done)](async_answer<std::optional<fleet_job>> j) {
                 if (j.error) return done(failed<cancelled_job>(j.error));
                 done(answer(cancelled_job{std::move(j.value), here}));
               });
             });
}

std::optional<fleet_job> job_queue::cancel(const context& ctx, std::string_view id, bool* cancelled_here) {
  cancelled_job c = wait_for<cancelled_job>(
      [&](answer_fn<cancelled_job> done) { async_cancel(ctx, std::string(id), std::move(done)); });
  if (cancelled_here != nullptr) *cancelled_here = c.cancelled_here;
  return std::move(c.job);
}

// ---- jobs by state: SCAN over the job hashes, each read in the same pipeline ----

void job_queue::async_list(const context& ctx, list_query q, answer_fn<job_list> done) {
  const std::string prefix = key("job:");
  std::vector<std::string> scan{"SCAN",  q.cursor.empty() ? "0" : q.cursor,
                                "MATCH", prefix + "*",
                                "COUNT", std::to_string(std::max<std::size_t>(q.count, 1))};
  redis_.async_call(ctx, std::move(scan),
                    [this, ctx, q = std::move(q), prefix, done = std::move(done)](redis_result r) mutable {
                      if (auto e = error_of(r)) return done(failed<job_list>(e));
                      const redis_reply& page = r.reply;
                      if (!page.is_array() || page.elements.size() != 2 || !page.elements[1].is_array()) {
                        return done(failed<job_list>(broker_error_ptr("SCAN", page)));
                      }
                      struct gather {
                        std::mutex mu;
                        job_list list;
                        std::string filter;
                        std::size_t waiting = 0;
                        std::exception_ptr error;
                        answer_fn<job_list> done;
                      };
                      auto g = std::make_shared<gather>();
                      g->list.next_cursor = page.elements[0].str == "0" ? std::string() : page.elements[0].str;
                      g->filter = std::move(q.state);
                      g->done = std::move(done);
                      std::vector<std::string> ids;
                      for (const redis_reply& k : page.elements[1].elements) {
                        if (k.str.size() > prefix.size() && k.str.compare(0, prefix.size(), prefix) == 0) {
                          ids.push_back(k.str.substr(prefix.size()));
                        }
                      }
                      if (ids.empty()) return g->done(answer(std::move(g->list)));
                      g->waiting = ids.size();
                      for (std::string& id : ids) {
                        async_find(ctx, std::move(id), [g](async_answer<std::optional<fleet_job>> j) {
                          std::unique_lock lock(g->mu);
                          if (j.error) g->error = j.error;
                          if (!j.error && j.value && state_matches(j.value->state(), g->filter)) {
                            g->list.jobs.push_back(std::move(*j.value));
                          }
                          if (--g->waiting != 0) return;
                          lock.unlock();
                          if (g->error) return g->done(failed<job_list>(g->error));
                          g->done(answer(std::move(g->list)));
                        });
                      }
                    });
}

job_list job_queue::list(const context& ctx, const list_query& q) {
  return wait_for<job_list>([&](answer_fn<job_list> done) { async_list(ctx, q, std::move(done)); });
}

}  // namespace hourglass::fleet
