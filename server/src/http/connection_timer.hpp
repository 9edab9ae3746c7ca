// A connection's socket timeouts (idle, header, body, write) on one asio
// timer, re-armed lazily. Each operation pushes the expiry forward; that
// only records it. The timer stays where it was armed, and when it fires
// before the expiry it moves there (next_timer_step). Beast's basic_stream
// cancelled and re-armed a timer for every read and write: ~6 % of a small
// request's CPU in a profile of the echo path. Internal to the server.
//
// Thread safety: the connection's strand only.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>

namespace hourglass::server::detail {

enum class timer_step { wait, rearm, expire };

// What a fired timer does, from the expiry set last (max: none) and now.
constexpr timer_step next_timer_step(std::chrono::steady_clock::time_point expiry,
                                     std::chrono::steady_clock::time_point now) noexcept {
  if (expiry == std::chrono::steady_clock::time_point::max()) return timer_step::wait;  // the next expiry arms it
  return now < expiry ? timer_step::rearm : timer_step::expire;
}

class connection_timer {
 public:
  using clock = std::chrono::steady_clock;

  // `on_expiry` runs on the strand when an expiry passes, while `owner` lives.
  connection_timer(const boost::asio::any_io_executor& strand, std::function<void()> on_expiry)
      : timer_(strand), on_expiry_(std::move(on_expiry)) {}

  // Set before the first expiry: what must be alive for on_expiry to run.
  void guard(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

  void expires_after(clock::duration d) {
    expiry_ = clock::now() + d;
    if (!armed_ || expiry_ < armed_at_) arm(expiry_);
  }
  void expires_never() noexcept { expiry_ = clock::time_point::max(); }
  // No expiry, and no pending wait holding the timer (the connection closed).
  void cancel() noexcept {
    expiry_ = clock::time_point::max();
    armed_ = false;
    timer_.cancel();
  }

 private:
  void arm(clock::time_point at) {
    armed_ = true;
    armed_at_ = at;
    timer_.expires_at(at);  // cancels the wait before: its handler sees operation_aborted
    timer_.async_wait([this, owner = owner_](const boost::system::error_code& ec) {
      if (ec) return;  // cancelled: re-armed, closed, or destroyed with its owner
      const auto alive = owner.lock();
      if (!alive) return;
      fired();
    });
  }

  void fired() {
    armed_ = false;
    switch (next_timer_step(expiry_, clock::now())) {
      case timer_step::wait: return;
      case timer_step::rearm: return arm(expiry_);
      case timer_step::expire: expiry_ = clock::time_point::max(); return on_expiry_();
    }
  }

  boost::asio::steady_timer timer_;
  std::function<void()> on_expiry_;
  std::weak_ptr<void> owner_;
  clock::time_point expiry_ = clock::time_point::max();
  clock::time_point armed_at_ = clock::time_point::max();
  bool armed_ = false;
};

}  // namespace hourglass::server::detail
