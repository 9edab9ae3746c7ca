#include "hourglass/context.hpp"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>

namespace hourglass {

namespace detail {

struct parent_forwarder {
  cancellation_source* child;
  const cancellation_token* parent;
  void operator()() const noexcept { child->request_stop(parent->reason()); }
};

struct context_state {
  context_state(hourglass::clock& c, time_point d) : clk(&c), deadline(d) {}
  ~context_state() {
    if (timer) clk->cancel(timer);
  }

  hourglass::clock* clk;
  time_point deadline;
  cancellation_source source;
  cancellation_token token = source.token();
  std::shared_ptr<context_state> parent;  // keeps the parent's deadline timer alive
  cancellation_token parent_token;
  std::optional<cancellation_callback<parent_forwarder>> parent_link;
  timer_id timer;

  void arm_timer() {
    if (deadline == never) return;
    // The timer shares only the cancellation state, not the context: a
    // context nobody holds any more is freed and its timer cancelled.
    timer = clk->schedule(deadline,
                          [src = source]() mutable noexcept { src.request_stop(status::expired(expiry_stage::run)); });
  }
};

}  // namespace detail

const char* stopped_error::what() const noexcept {
  return why_.code == outcome::deadline_exceeded ? "hourglass: deadline exceeded" : "hourglass: cancelled";
}

namespace {
std::shared_ptr<detail::context_state> make_root(clock& clk, time_point deadline) {
  auto s = std::make_shared<detail::context_state>(clk, deadline);
  if (deadline != never && deadline <= clk.now()) {
    s->source.request_stop(status::expired(expiry_stage::run));
  } else {
    s->arm_timer();
  }
  return s;
}
}  // namespace

context::context() : context(background(real_clock())) {}

context context::background(hourglass::clock& clk) {
  return context(std::make_shared<detail::context_state>(clk, never));
}

hourglass::clock& context::get_clock() const noexcept { return *state_->clk; }
time_point context::deadline() const noexcept { return state_->deadline; }
duration context::remaining() const noexcept { return hourglass::remaining(state_->deadline, state_->clk->now()); }

bool context::done() const noexcept {
  if (state_->token.stop_requested()) return true;
  return state_->deadline != never && state_->clk->now() >= state_->deadline;
}

status context::stop_status() const noexcept {
  if (state_->deadline == never) return state_->token.reason();
  return stop_status(state_->clk->now());
}

status context::stop_status(time_point now) const noexcept {
  status s = state_->token.reason();
  if (!s.is_ok()) return s;
  if (state_->deadline != never && now >= state_->deadline) return status::expired(expiry_stage::run);
  return status::ok();
}

void context::check() const {
  if (const status s = stop_status(); !s.is_ok()) throw stopped_error(s);
}

cancellation_token context::token() const noexcept { return state_->token; }

bool context::sleep_until(time_point t) const {
  if (done()) return false;
  clock& clk = *state_->clk;
  if (t <= clk.now()) return true;
  struct waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool woken = false;
    void wake() noexcept {
      std::lock_guard lock(mu);
      woken = true;
      cv.notify_all();
    }
  };
  if (clk.is_steady_clock()) {
    // One wake-up: this thread's own timed wait ends at `t` or the deadline,
    // whichever is first, without a hop through the timer thread (which
    // doubled the time from a deadline to a sleeper's waking). A cancel
    // still wakes it through the token.
    waiter w;
    const time_point until = earliest(t, state_->deadline);
    {
      cancellation_callback on_stop(state_->token, [&w]() noexcept { w.wake(); });
      std::unique_lock lock(w.mu);
      if (until == never) {
        w.cv.wait(lock, [&] { return w.woken; });
      } else {
        w.cv.wait_until(lock, until, [&] { return w.woken; });
      }
    }  // the callback is deregistered (or has finished) before `w` goes
    return !state_->token.stop_requested() && clk.now() >= t;
  }
  auto w = std::make_shared<waiter>();
  const timer_id id = clk.schedule(t, [w]() noexcept { w->wake(); });
  {
    cancellation_callback on_stop(state_->token, [&w]() noexcept { w->wake(); });
    std::unique_lock lock(w->mu);
    w->cv.wait(lock, [&] { return w->woken; });
  }
  clk.cancel(id);
  return !state_->token.stop_requested() && clk.now() >= t;
}

bool context::sleep_for(duration d) const { return sleep_until(saturating_add(state_->clk->now(), d)); }

context_source context::child(child_limits limits) const {
  clock& clk = *state_->clk;
  const time_point capped = earliest(state_->deadline, saturating_add(clk.now(), limits.cap));
  const time_point d = capped == never ? never : saturating_sub(capped, limits.reserve);
  return child_until(d);
}

context_source context::child_until(time_point deadline) const {
  clock& clk = *state_->clk;
  const time_point d = earliest(deadline, state_->deadline);
  auto s = std::make_shared<detail::context_state>(clk, d);
  s->parent = state_;
  s->parent_token = state_->token;
  // Registering on the parent runs the forwarder at once if the parent has
  // already stopped: a child of a stopped parent is born stopped.
  s->parent_link.emplace(s->parent_token, detail::parent_forwarder{&s->source, &s->parent_token});
  if (!s->source.stop_requested()) {
    if (d != never && d <= clk.now()) {
      s->source.request_stop(status::expired(expiry_stage::run));
    } else if (d < state_->deadline) {
      s->arm_timer();  // an equal deadline is fired by the parent's timer
    }
  }
  return context_source(context(std::move(s)));
}

context_source::context_source(hourglass::clock& clk, time_point deadline) : ctx_(make_root(clk, deadline)) {}

context_source context_source::with_timeout(hourglass::clock& clk, duration budget) {
  return context_source(clk, saturating_add(clk.now(), budget));
}

bool context_source::cancel(cancel_cause cause) noexcept {
  return ctx_.state_->source.request_stop(status::cancelled(cause));
}

context_source context_source::watched(hourglass::clock& clk, time_point deadline, time_point now) {
  auto s = std::make_shared<detail::context_state>(clk, deadline);
  if (deadline != never && deadline <= now) s->source.request_stop(status::expired(expiry_stage::run));
  return context_source(context(std::move(s)));
}

bool context_source::arm_if_shared() {
  detail::context_state& s = *ctx_.state_;
  if (ctx_.state_.use_count() <= 1 || s.timer || s.deadline == never || s.token.stop_requested()) return false;
  if (s.deadline <= s.clk->now()) {
    s.source.request_stop(status::expired(expiry_stage::run));
    return false;
  }
  s.arm_timer();
  return true;
}

bool context_source::expire(expiry_stage stage) noexcept {
  return ctx_.state_->source.request_stop(status::expired(stage));
}

}  // namespace hourglass
