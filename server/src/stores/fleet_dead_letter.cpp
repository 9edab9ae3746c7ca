#include "stores/fleet_dead_letter.hpp"

#include <utility>

#include "core/core.hpp"

namespace hourglass::server::detail {

std::string error_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown error";
  }
}

duration fleet_dead_letter::min_budget_of(std::string_view handler) const {
  const handler_entry* e = c_.find_handler(handler);
  return e != nullptr ? e->min_budget : duration::zero();
}

void fleet_dead_letter::replay(std::string id, duration freshness, callback<dead_result> done) {
  queue_.async_find(
      context(), id,
      calls_.tracked([this, id, freshness,
                      done = std::move(done)](fleet::async_answer<std::optional<fleet::fleet_job>> j) mutable {
        if (j.error || !j.value) return done(failure(j.error, "replay"));
        queue_.async_replay(
            context(), id, freshness, min_budget_of(j.value->handler), c_.opts.scheduling == policy::hourglass,
            calls_.tracked([this, id, freshness, done = std::move(done)](fleet::async_answer<fleet::dead_answer> a) {
              if (a.error) return done(failure(a.error, "replay"));
              dead_result r = result_of(a.value);
              r.budget = freshness;
              if (r.verdict != dead_result::kind::done) return done(std::move(r));
              r.job.id = id;
              r.job.state = jobs::to_string(jobs::job_state::queued);
              done(std::move(r));
            }));
      }));
}

void fleet_dead_letter::remove(std::string id, callback<dead_result> done) {
  queue_.async_delete_dead(context(), std::move(id),
                           calls_.tracked([this, done = std::move(done)](fleet::async_answer<fleet::dead_answer> a) {
                             done(a.error ? failure(a.error, "delete") : result_of(a.value));
                           }));
}

void fleet_dead_letter::purge(std::size_t limit, callback<dead_result> done) {
  queue_.async_purge_dead(
      context(), limit, calls_.tracked([this, done = std::move(done)](fleet::async_answer<fleet::job_queue::purged> a) {
        if (a.error) return done(failure(a.error, "purge"));
        dead_result r;
        r.verdict = dead_result::kind::done;
        r.purged = a.value.jobs;
        r.entries = a.value.entries;
        r.left = a.value.left;
        done(std::move(r));
      }));
}

void fleet_dead_letter::replay_oldest(std::size_t limit, duration freshness, callback<dead_result> done) {
  auto walk = std::make_shared<bulk_replay>();
  walk->freshness = freshness;
  walk->done = std::move(done);
  gather(std::move(walk), "", limit);
}

// Up to `limit` dead jobs, the oldest first (a sharded queue's shard by
// shard), then their replays.
void fleet_dead_letter::gather(std::shared_ptr<bulk_replay> walk, std::string cursor, std::size_t limit) {
  queue_.async_list(context(),
                    {.state = std::string(jobs::to_string(jobs::job_state::dead)),
                     .cursor = std::move(cursor),
                     .count = limit - walk->jobs.size(),
                     .handler = ""},
                    calls_.tracked([this, walk, limit](fleet::async_answer<fleet::job_list> a) mutable {
                      if (a.error) return walk->done(failure(a.error, "replay"));
                      for (fleet::fleet_job& j : a.value.jobs) walk->jobs.push_back(std::move(j));
                      if (walk->jobs.size() < limit && !a.value.next_cursor.empty()) {
                        return gather(std::move(walk), std::move(a.value.next_cursor), limit);
                      }
                      replay_next(std::move(walk));
                    }));
}

void fleet_dead_letter::replay_next(std::shared_ptr<bulk_replay> walk) {
  if (walk->next == walk->jobs.size() || walk->result.verdict == dead_result::kind::refused) {
    // What is left on the dead list, read after the last replay.
    return queue_.async_queue_states(context(), fleet::queue_op::look,
                                     calls_.tracked([walk](fleet::async_answer<std::vector<fleet::queue_state>> q) {
                                       if (!q.error) {
                                         walk->result.left = 0;
                                         for (const fleet::queue_state& s : q.value)
                                           walk->result.left += s.dead_letters;
                                       }
                                       walk->done(std::move(walk->result));
                                     }));
  }
  const fleet::fleet_job& j = walk->jobs[walk->next++];
  queue_.async_replay(context(), j.id, walk->freshness, min_budget_of(j.handler),
                      c_.opts.scheduling == policy::hourglass,
                      calls_.tracked([this, walk](fleet::async_answer<fleet::dead_answer> a) mutable {
                        if (a.error) return walk->done(failure(a.error, "replay"));
                        switch (a.value.verdict) {
                          case fleet::dead_answer::kind::done: ++walk->result.replayed; break;
                          case fleet::dead_answer::kind::refused:
                            walk->result.verdict = dead_result::kind::refused;
                            break;
                          default: ++walk->result.skipped;  // replayed or deleted meanwhile, or expired
                        }
                        replay_next(std::move(walk));
                      }));
}

dead_result fleet_dead_letter::failure(const std::exception_ptr& error, std::string_view action) {
  dead_result r;
  r.verdict = dead_result::kind::not_found;
  if (!error) return r;
  ++lookup_errors_;
  c_.log->warn("fleet: dead letter {}: {}", action, error_text(error));
  r.verdict = dead_result::kind::unavailable;
  return r;
}

dead_result fleet_dead_letter::result_of(const fleet::dead_answer& a) {
  dead_result r;
  r.state = a.state;
  r.predicted_wait = a.predicted_wait;
  switch (a.verdict) {
    case fleet::dead_answer::kind::done: r.verdict = dead_result::kind::done; break;
    case fleet::dead_answer::kind::refused: r.verdict = dead_result::kind::refused; break;
    case fleet::dead_answer::kind::not_dead: r.verdict = dead_result::kind::not_dead; break;
    case fleet::dead_answer::kind::unknown: r.verdict = dead_result::kind::not_found; break;
  }
  return r;
}

}  // namespace hourglass::server::detail
