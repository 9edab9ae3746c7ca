// The dead letter of hourglassd --broker's queue (docs/fleet.md, "Dead
// letter"): replay or delete one dead job, purge or replay the oldest. Each
// action is a chain of asynchronous broker calls, counted in flight for the
// store (its end waits for their callbacks). Internal to the server.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/job_store.hpp"
#include "hourglass/fleet/sharded_queue.hpp"

namespace hourglass::server::detail {

struct core;

// The store's broker calls in flight: each callback counted until it has run.
class calls_in_flight {
 public:
  // `fn`, counted as a call in flight until it has run.
  template <class Fn>
  auto tracked(Fn fn) {
    {
      std::lock_guard lock(mu_);
      ++n_;
    }
    return [this, fn = std::move(fn)](auto answer) mutable {
      fn(std::move(answer));
      std::lock_guard lock(mu_);
      if (--n_ == 0) none_.notify_all();
    };
  }

  // Returns once none is in flight, or once `give_up()` (checked at each end).
  template <class Pred>
  void wait_none(Pred give_up) {
    std::unique_lock lock(mu_);
    none_.wait(lock, [&] { return n_ == 0 || give_up(); });
  }

 private:
  std::mutex mu_;
  std::condition_variable none_;
  std::size_t n_ = 0;
};

// A failed call's exception as text, for the log.
std::string error_text(const std::exception_ptr& e);

class fleet_dead_letter {
 public:
  template <class T>
  using callback = job_store::callback<T>;

  // `lookup_errors` counts the broker's failures (the store's metrics).
  fleet_dead_letter(core& c, fleet::sharded_queue& queue, calls_in_flight& calls,
                    std::atomic<std::uint64_t>& lookup_errors)
      : c_(c), queue_(queue), calls_(calls), lookup_errors_(lookup_errors) {}

  void replay(std::string id, duration freshness, callback<dead_result> done);
  void remove(std::string id, callback<dead_result> done);
  void purge(std::size_t limit, callback<dead_result> done);
  // The oldest `limit`, in the order they died, one replay after another:
  // each judged on the backlog the ones before it made; the first refusal ends it.
  void replay_oldest(std::size_t limit, duration freshness, callback<dead_result> done);

 private:
  struct bulk_replay {
    std::vector<fleet::fleet_job> jobs;
    std::size_t next = 0;
    duration freshness{};
    dead_result result{.verdict = dead_result::kind::done};
    callback<dead_result> done;
  };

  void gather(std::shared_ptr<bulk_replay> walk, std::string cursor, std::size_t limit);
  void replay_next(std::shared_ptr<bulk_replay> walk);
  // An action the broker could not take (`error` set), or of no such job.
  dead_result failure(const std::exception_ptr& error, std::string_view action);
  static dead_result result_of(const fleet::dead_answer& a);
  duration min_budget_of(std::string_view handler) const;

  core& c_;
  fleet::sharded_queue& queue_;
  calls_in_flight& calls_;
  std::atomic<std::uint64_t>& lookup_errors_;
};

}  // namespace hourglass::server::detail
