// Group commit for one kind of script call: calls that arrive while a batch
// is at the broker wait here and go together in the next one, so a busy
// queue makes one round trip (and one script run) per batch, not per job,
// while a lone call still goes at once. The lane only decides what goes
// when; the caller sends a batch and, once it is answered, asks for the
// next. Internal to fleet/.
//
//   if (auto batch = lane.push(std::move(calls))) send(std::move(*batch));
//   ... when a batch is answered:
//   if (auto batch = lane.next()) send(std::move(*batch));
//
// A completion that outlives the lane's owner (a caller answered early, its
// context stopped, may let the owner go while its batch is at the broker)
// holds the owner's `liveness` lock and answers only when the owner is gone.
//
// A batch is the oldest waiting calls, at most max_calls, and as many as fit
// in max_bytes by `bytes(call)` (at least one); with `same_batch`, only those
// that may share a script call with the first. With max_in_flight above one,
// a further batch goes while others are at the broker once overlap_at calls
// wait: the caller builds and answers one batch while Redis runs another.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "hourglass/cancellation.hpp"
#include "hourglass/context.hpp"
#include "hourglass/fleet/job_queue.hpp"

namespace hourglass::fleet::detail {

// A call that waits in a lane, answered once: by its batch, or at once
// when its context stops first (stopped_error; the batch, if it was sent,
// may still apply it, as with any call cut off). A lane's call type derives
// from it and adds what its script needs.
template <class T>
struct lane_call {
  using value_type = T;
  context ctx;
  answer_fn<T> done;
  std::atomic<bool> answered{false};
  std::unique_ptr<cancellation_callback<std::function<void()>>> on_stop;

  // The first answer wins: the batch's, or the stop's.
  void finish(async_answer<T> a) {
    if (!answered.exchange(true)) done(std::move(a));
  }
};

// Arms `call` to be answered stopped_error as soon as its context stops
// (at once, when it has stopped already).
template <class Call>
void answer_when_stopped(const std::shared_ptr<Call>& call) {
  std::weak_ptr<Call> weak = call;
  call->on_stop = std::make_unique<cancellation_callback<std::function<void()>>>(
      call->ctx.token(), std::function<void()>([weak] {
        if (auto c = weak.lock()) {
          async_answer<typename Call::value_type> a;
          a.error = std::make_exception_ptr(stopped_error(c->ctx.stop_status()));
          c->finish(std::move(a));
        }
      }));
}

// Whether the owner of lanes still lives: its destructor clears `alive`
// under the lock, completions hold the lock while they use the owner.
struct liveness {
  std::mutex mu;
  bool alive = true;
};

template <class Call>
class batch_lane {
 public:
  using call_ptr = std::shared_ptr<Call>;
  using batch = std::vector<call_ptr>;

  struct limits {
    std::size_t max_calls = 256;
    std::size_t max_in_flight = 1;  // batches at the broker at once
    // With one batch at the broker, another goes only once this many calls
    // wait: a small second batch would cost a script call of its own for
    // little, where waiting makes it bigger.
    std::size_t overlap_at = 1;
    std::size_t max_bytes = 4 * 1024 * 1024;
    std::function<std::size_t(const Call&)> bytes;             // nullptr: calls weigh nothing
    std::function<bool(const Call&, const Call&)> same_batch;  // nullptr: any two may
  };

  explicit batch_lane(limits l) : limits_(std::move(l)) {}

  // Adds `calls`; a batch to send now, when the lane has room at the broker.
  std::optional<batch> push(batch calls) {
    std::lock_guard lock(mu_);
    waiting_.insert(waiting_.end(), std::make_move_iterator(calls.begin()), std::make_move_iterator(calls.end()));
    if (!may_send_locked(in_flight_)) return std::nullopt;
    ++in_flight_;
    return take_locked();
  }

  // A batch at the broker was answered: the next one, if one may go. Calls
  // left waiting go with the answer of a batch still at the broker.
  std::optional<batch> next() {
    std::lock_guard lock(mu_);
    if (!may_send_locked(in_flight_ - 1)) {
      --in_flight_;
      return std::nullopt;
    }
    return take_locked();
  }

  std::size_t in_flight() const {
    std::lock_guard lock(mu_);
    return in_flight_;
  }

 private:
  // Whether a batch may go with `others` batches at the broker.
  bool may_send_locked(std::size_t others) const {
    if (waiting_.empty() || others >= limits_.max_in_flight) return false;
    return others == 0 || waiting_.size() >= limits_.overlap_at;
  }

  batch take_locked() {
    std::size_t n = 0, bytes = 0;
    while (n < waiting_.size() && n < limits_.max_calls) {
      if (n > 0 && limits_.same_batch && !limits_.same_batch(*waiting_.front(), *waiting_[n])) break;
      if (limits_.bytes) bytes += limits_.bytes(*waiting_[n]);
      if (n > 0 && bytes > limits_.max_bytes) break;
      ++n;
    }
    const auto end = waiting_.begin() + static_cast<std::ptrdiff_t>(n);
    batch out(std::make_move_iterator(waiting_.begin()), std::make_move_iterator(end));
    waiting_.erase(waiting_.begin(), end);
    return out;
  }

  const limits limits_;
  mutable std::mutex mu_;
  batch waiting_;
  std::size_t in_flight_ = 0;  // batches at the broker
};

}  // namespace hourglass::fleet::detail
