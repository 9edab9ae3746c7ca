#include "hourglass/context.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
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

// The idle clock of a context with an idle limit: the time of the last
// progress, and one timer that fires when the limit could have run out. When
// it fires it stops the context if no progress came since, or moves to the
// new due time: progress() itself only stores a time. Shared with the timer's
// callback (which holds the cancellation state, not the context).
struct idle_watch {
  idle_watch(hourglass::clock& c, duration l, time_point now)
      : clk(&c), limit(l), last_ns(now.time_since_epoch().count()) {}

  hourglass::clock* clk;
  const duration limit;
  std::atomic<std::int64_t> last_ns;  // the last progress, ns since the clock's epoch
  std::atomic<int> committing{0};     // commits running here or below: that is progress, all along
  std::mutex mu;
  timer_id timer;       // under mu
  bool closed = false;  // under mu: the context is gone, arm no more

  time_point last_progress() const noexcept { return time_point(duration(last_ns.load(std::memory_order_relaxed))); }
  time_point due() const noexcept { return saturating_add(last_progress(), limit); }
  bool ran_out(time_point now) const noexcept {
    return now >= due() && committing.load(std::memory_order_acquire) == 0;
  }
  void note(time_point now) noexcept {
    // The latest wins: two threads reporting at once never move it back.
    std::int64_t seen = last_ns.load(std::memory_order_relaxed);
    const std::int64_t t = now.time_since_epoch().count();
    while (seen < t && !last_ns.compare_exchange_weak(seen, t, std::memory_order_relaxed)) {
    }
  }

  static void arm(const std::shared_ptr<idle_watch>& w, const cancellation_source& src) {
    std::lock_guard lock(w->mu);
    if (w->closed) return;
    w->timer = w->clk->schedule(w->due(), [w, src]() noexcept { fire(w, src); });
  }
  static void fire(const std::shared_ptr<idle_watch>& w, cancellation_source src) noexcept {
    {
      std::lock_guard lock(w->mu);
      if (w->closed) return;
      w->timer = {};
      const time_point now = w->clk->now();
      if (w->committing.load(std::memory_order_acquire) > 0) w->note(now);  // a commit is progress
      const time_point due = w->due();
      if (now < due) {  // progress came meanwhile: wait for the new due time
        try {
          w->timer = w->clk->schedule(due, [w, src]() noexcept { fire(w, src); });
        } catch (...) {  // no memory for a timer: done() still sees the limit
        }
        return;
      }
    }
    src.request_stop(status::expired(expiry_stage::idle));  // outside mu: stop callbacks may drop the context
  }
  void close() noexcept {
    std::lock_guard lock(mu);
    closed = true;
    if (timer) clk->cancel(timer);
    timer = {};
  }
};

struct context_state {
  context_state(hourglass::clock& c, time_point d) : clk(&c), deadline(d) {}
  ~context_state() {
    if (timer) clk->cancel(timer);
    if (idle) idle->close();
  }

  hourglass::clock* clk;
  time_point deadline;
  // Asked directly: a token copy kept here cost every context a reference
  // count taken and dropped: two locked instructions per job that takes a
  // context, for a handle the source already is.
  cancellation_source source;
  std::shared_ptr<context_state> parent;  // keeps the parent's deadline timer alive
  cancellation_token parent_token;
  std::optional<cancellation_callback<parent_forwarder>> parent_link;
  timer_id timer;
  std::shared_ptr<idle_watch> idle;    // set when the context has an idle limit
  std::atomic<bool> committed{false};  // a commit point was crossed here or in a descendant

  // Starts the idle clock at `now` (a limit of duration::max(): none).
  void start_idle(duration limit, time_point now) {
    if (limit == duration::max() || source.stop_requested()) return;
    idle = std::make_shared<idle_watch>(*clk, limit, now);
    if (limit <= duration::zero()) {
      source.request_stop(status::expired(expiry_stage::idle));
      return;
    }
    idle_watch::arm(idle, source);
  }
  bool idle_ran_out(time_point now) const noexcept { return idle && idle->ran_out(now); }

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
std::shared_ptr<detail::context_state> make_root(clock& clk, time_point deadline,
                                                 duration idle_limit = duration::max()) {
  auto s = std::make_shared<detail::context_state>(clk, deadline);
  const time_point now = clk.now();
  if (deadline != never && deadline <= now) {
    s->source.request_stop(status::expired(expiry_stage::run));
  } else {
    s->arm_timer();
  }
  s->start_idle(idle_limit, now);
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
  if (state_->source.stop_requested()) return true;
  if (state_->deadline == never && !state_->idle) return false;
  const time_point now = state_->clk->now();
  return (state_->deadline != never && now >= state_->deadline) || state_->idle_ran_out(now);
}

duration context::idle_limit() const noexcept { return state_->idle ? state_->idle->limit : duration::max(); }

time_point context::idle_deadline() const noexcept { return state_->idle ? state_->idle->due() : never; }

void context::progress() const noexcept {
  const detail::context_state* s = state_.get();
  bool read = false;
  time_point now{};
  for (; s != nullptr; s = s->parent.get()) {
    if (!s->idle) continue;
    if (!read) {
      now = s->clk->now();
      read = true;
    }
    s->idle->note(now);
  }
}

status context::stop_status() const noexcept {
  if (state_->deadline == never && !state_->idle) return state_->source.reason();
  return stop_status(state_->clk->now());
}

status context::stop_status(time_point now) const noexcept {
  status s = state_->source.reason();
  if (!s.is_ok()) return s;
  if (state_->deadline != never && now >= state_->deadline) return status::expired(expiry_stage::run);
  if (state_->idle_ran_out(now)) return status::expired(expiry_stage::idle);
  return status::ok();
}

void context::check() const {
  if (const status s = stop_status(); !s.is_ok()) throw stopped_error(s);
}

cancellation_token context::token() const noexcept { return state_->source.token(); }

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
    {
      cancellation_callback on_stop(state_->source.token(), [&w]() noexcept { w.wake(); });
      std::unique_lock lock(w.mu);
      for (;;) {
        // The idle due time moves with progress from other threads: look again.
        const time_point until = earliest(earliest(t, state_->deadline), idle_deadline());
        if (until == never) {
          w.cv.wait(lock, [&] { return w.woken; });
        } else {
          w.cv.wait_until(lock, until, [&] { return w.woken; });
        }
        if (w.woken) break;
        const time_point now = clk.now();
        if (now >= t || (state_->deadline != never && now >= state_->deadline) || state_->idle_ran_out(now)) break;
      }
    }  // the callback is deregistered (or has finished) before `w` goes
    return !state_->source.stop_requested() && clk.now() >= t;
  }
  auto w = std::make_shared<waiter>();
  const timer_id id = clk.schedule(t, [w]() noexcept { w->wake(); });
  // Time reached `t` between the reading above and the schedule (another
  // thread advanced a manual_clock): a timer in the clock's past runs only at
  // its next advance(), which may never come. Removed before it ran: `t` is
  // reached, nothing will wake this thread, so do not wait.
  if (clk.now() >= t && clk.cancel(id)) return !state_->source.stop_requested();
  {
    cancellation_callback on_stop(state_->source.token(), [&w]() noexcept { w->wake(); });
    std::unique_lock lock(w->mu);
    w->cv.wait(lock, [&] { return w->woken; });
  }
  clk.cancel(id);
  return !state_->source.stop_requested() && clk.now() >= t;
}

void context::end_commit() const noexcept {
  for (detail::context_state* s = state_.get(); s != nullptr; s = s->parent.get()) {
    if (s->idle) s->idle->committing.fetch_sub(1, std::memory_order_acq_rel);
  }
  progress();  // the idle clock restarts as the commit ends
}

bool context::committed() const noexcept { return state_->committed.load(std::memory_order_acquire); }

context context::begin_commit(duration need, duration cap) const {
  const time_point now = state_->clk->now();
  const status stopped = stop_status(now);
  if (!stopped.is_ok()) throw stopped_error(stopped);
  if (hourglass::remaining(state_->deadline, now) < need) throw stopped_error(status::expired(expiry_stage::run));
  for (detail::context_state* s = state_.get(); s != nullptr; s = s->parent.get()) {
    s->committed.store(true, std::memory_order_release);
    if (s->idle) s->idle->committing.fetch_add(1, std::memory_order_acq_rel);
  }
  progress();
  return context(make_root(*state_->clk, cap == duration::max() ? never : saturating_add(now, cap)));
}

bool context::sleep_for(duration d) const { return sleep_until(saturating_add(state_->clk->now(), d)); }

context_source context::child(child_limits limits) const {
  clock& clk = *state_->clk;
  const time_point capped = earliest(state_->deadline, saturating_add(clk.now(), limits.cap));
  const time_point d = capped == never ? never : saturating_sub(capped, limits.reserve);
  return child_until(d, limits.idle);
}

context_source context::child_until(time_point deadline, duration idle_limit) const {
  clock& clk = *state_->clk;
  const time_point d = earliest(deadline, state_->deadline);
  auto s = std::make_shared<detail::context_state>(clk, d);
  s->parent = state_;
  s->parent_token = state_->source.token();
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
  // The tighter idle limit: the parent's own clock keeps running (the
  // child's progress is its progress too), the child's starts now.
  s->start_idle(std::min(idle_limit, this->idle_limit()), clk.now());
  return context_source(context(std::move(s)));
}

context_source::context_source(hourglass::clock& clk, time_point deadline) : ctx_(make_root(clk, deadline)) {}

context_source::context_source(hourglass::clock& clk, time_point deadline, duration idle_limit)
    : ctx_(make_root(clk, deadline, idle_limit)) {}

context_source context_source::with_timeout(hourglass::clock& clk, duration budget) {
  return context_source(clk, saturating_add(clk.now(), budget));
}

bool context_source::cancel(cancel_cause cause) noexcept {
  return ctx_.state_->source.request_stop(status::cancelled(cause));
}

context_source context_source::watched(hourglass::clock& clk, time_point deadline, time_point now,
                                       duration idle_limit) {
  auto s = std::make_shared<detail::context_state>(clk, deadline);
  if (deadline != never && deadline <= now) s->source.request_stop(status::expired(expiry_stage::run));
  s->start_idle(idle_limit, now);
  return context_source(context(std::move(s)));
}

bool context_source::arm_if_shared() {
  detail::context_state& s = *ctx_.state_;
  if (ctx_.state_.use_count() <= 1 || s.timer || s.deadline == never || s.source.stop_requested()) return false;
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
