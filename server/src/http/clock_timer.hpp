// A one-shot timer on the daemon's injected clock whose callback runs on a
// strand: how a session answers at a deadline on the same clock the executor
// expires jobs on (a manual_clock in tests). Internal to the server.
//
// The clock calls back on its own thread (the timer thread, or a test's
// advance()); the callback only posts to the strand. A generation number,
// read and written on the strand, makes a callback that was already posted
// when the timer was re-armed or cancelled do nothing.
//
// Thread safety: arm and cancel on the strand only. The destructor may run
// anywhere; once it returns nothing more is posted.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "hourglass/clock.hpp"

namespace hourglass::server::detail {

class clock_timer {
 public:
  clock_timer(hourglass::clock& clk, boost::asio::any_io_executor strand)
      : clk_(clk), state_(std::make_shared<shared>(std::move(strand))) {}
  ~clock_timer() {
    clk_.cancel(id_);
    std::lock_guard lock(state_->mu);  // waits for a callback posting right now
    state_->closed = true;
  }
  clock_timer(const clock_timer&) = delete;
  clock_timer& operator=(const clock_timer&) = delete;

  // `fn` runs on the strand at `when` (at once if past), unless cancel() or
  // arm() comes first. Replaces an armed timer.
  void arm(time_point when, std::function<void()> fn) {
    cancel();
    const std::uint64_t gen = state_->generation;
    id_ = clk_.schedule(when, [st = state_, gen, fn = std::move(fn)]() mutable noexcept {
      std::lock_guard lock(st->mu);
      if (st->closed) return;
      try {
        boost::asio::post(st->strand, [st, gen, fn = std::move(fn)] {
          if (st->generation == gen) fn();
        });
      } catch (...) {
        // Out of memory while posting: the answer then comes with the job's outcome.
      }
    });
  }

  void cancel() noexcept {
    ++state_->generation;
    clk_.cancel(id_);
    id_ = {};
  }

 private:
  struct shared {
    explicit shared(boost::asio::any_io_executor s) : strand(std::move(s)) {}
    boost::asio::any_io_executor strand;
    std::uint64_t generation = 0;  // strand only
    std::mutex mu;                 // serialises posting with the destructor
    bool closed = false;
  };

  hourglass::clock& clk_;
  std::shared_ptr<shared> state_;
  timer_id id_;
};

}  // namespace hourglass::server::detail
