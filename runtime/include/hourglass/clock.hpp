// The clock is injected, and it owns waiting too.
//
// Everything in hourglass reads time through a `clock&` it was given: now(),
// and a timer service that calls a function at a time point. That timer
// service is what makes a context fire by itself at its deadline, so a job
// never has to poll to be stopped.
//
// Two implementations:
//  - steady_clock_service: std::chrono::steady_clock plus one timer thread
//    (started on first use). Production.
//  - manual_clock: time moves only when a test calls advance()/set(); due
//    timers run inside that call, in deadline order, on the caller's thread.
//
// Thread safety: every member of both is safe to call from any thread,
// including from inside a timer callback.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "hourglass/time.hpp"

namespace hourglass {

// Identifies one scheduled timer. Cheap to copy; a default one names nothing.
struct timer_id {
  time_point when{};
  std::uint64_t seq = 0;
  explicit operator bool() const noexcept { return seq != 0; }
};

class clock {
 public:
  virtual ~clock() = default;
  virtual time_point now() const noexcept = 0;

  // Runs `fn` once, at or after `when` (at once, from the timer thread or the
  // next advance(), if `when` is already past). `fn` must not throw and should
  // be short: it runs on the timer thread, delaying other timers.
  virtual timer_id schedule(time_point when, std::function<void()> fn) = 0;

  // True when the timer was removed before it started: it will never run.
  // False when it already ran, is running now, or never existed.
  virtual bool cancel(timer_id id) noexcept = 0;

  // Blocks the calling thread until `when`. Prefer context::sleep_until,
  // which also wakes on cancellation.
  void sleep_until(time_point when);

  // True when now() is std::chrono::steady_clock's: a thread may then wait
  // for a time of this clock with a timed wait of its own (one wake-up, no
  // timer thread in between) instead of scheduling a timer.
  virtual bool is_steady_clock() const noexcept { return false; }

  // std::condition_variable::wait_until on this clock: waits on `cv`, `lock`
  // held, until pred() holds (true) or the clock reaches `deadline` (false:
  // pred() as it is then). Whoever makes pred() true notifies `cv` while
  // holding lock.mutex() (or after changing pred's state under it). On the
  // steady clock it is a timed wait of the thread's own; on any other clock a
  // timer at `deadline` locks lock.mutex() and notifies `cv`, so a
  // manual_clock's advance() ends the wait exactly at the deadline. A timer
  // that runs as the wait ends is waited for: it never touches `cv`, the
  // mutex or this frame after the call returns. `never`: no timer at all.
  // Not from a manual_clock's timer callback: its timer would need the
  // advance() that is running the callback.
  template <class Pred>
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline, Pred pred);
};

template <class Pred>
bool clock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline,
                       Pred pred) {
  if (pred()) return true;
  if (deadline == never) {
    cv.wait(lock, pred);
    return true;
  }
  if (is_steady_clock()) return cv.wait_until(lock, deadline, pred);
  if (now() >= deadline) return false;
  // The flag is the timer's and the waiter's (guarded by lock.mutex()): a
  // timer that is running when the wait ends keeps it alive by itself.
  auto fired = std::make_shared<bool>(false);
  const timer_id id = schedule(deadline, [fired, mu = lock.mutex(), &cv] {
    const std::lock_guard guard(*mu);
    *fired = true;
    cv.notify_all();
  });
  // The deadline passed between the reading above and the schedule: a
  // manual_clock runs a timer in its past only at its next advance().
  if (now() >= deadline && cancel(id)) return pred();
  bool met = false;
  cv.wait(lock, [&] { return (met = pred()) || *fired; });
  if (!cancel(id) && !*fired) {
    // The timer runs now, waiting for the mutex: let it finish with `cv`
    // and the mutex before the caller may destroy them.
    cv.wait(lock, [&] { return *fired; });
    met = pred();
  }
  return met;
}

// Asks the OS to end the calling thread's timed waits on time: Linux lets a
// normal thread's wait end up to 50 us late (timer slack) to batch wake-ups;
// this sets 1 ns. The timer thread and the executor's workers call it. A
// no-op elsewhere.
void request_precise_timed_waits() noexcept;

// Ordered timer storage shared by both clocks. Not thread-safe by itself.
class timer_queue {
 public:
  timer_id push(time_point when, std::function<void()> fn);
  bool erase(timer_id id) noexcept;
  bool empty() const noexcept { return timers_.empty(); }
  std::size_t size() const noexcept { return timers_.size(); }
  time_point next_due() const noexcept;             // `never` when empty
  bool has_due_at(time_point when) const noexcept;  // a timer is due at exactly `when`
  // Removes and returns the earliest timer if it is due at `now`.
  std::function<void()> pop_due(time_point now);

 private:
  std::map<std::pair<time_point, std::uint64_t>, std::function<void()>> timers_;
  std::uint64_t next_seq_ = 1;
};

class steady_clock_service final : public clock {
 public:
  steady_clock_service() = default;
  ~steady_clock_service() override;  // pending timers are dropped, not run
  steady_clock_service(const steady_clock_service&) = delete;
  steady_clock_service& operator=(const steady_clock_service&) = delete;

  time_point now() const noexcept override { return std::chrono::steady_clock::now(); }
  timer_id schedule(time_point when, std::function<void()> fn) override;
  bool cancel(timer_id id) noexcept override;
  bool is_steady_clock() const noexcept override { return true; }

 private:
  void run();

  std::mutex mu_;
  std::condition_variable wake_;
  timer_queue timers_;
  time_point planned_wake_ = never;  // when the sleeping thread wakes next; min() while awake
  bool stopping_ = false;
  std::thread thread_;  // started by the first schedule()
};

// The process's real clock, for code that was given none. Tests inject a
// manual_clock instead; nothing in the library reads this behind a caller's back.
steady_clock_service& real_clock();

class manual_clock final : public clock {
 public:
  explicit manual_clock(time_point start = time_point{} + std::chrono::hours(1)) : now_(start) {}

  time_point now() const noexcept override;
  timer_id schedule(time_point when, std::function<void()> fn) override;
  bool cancel(timer_id id) noexcept override;

  // Moves time forward and runs every timer due by the new time, in order,
  // including timers that those callbacks schedule inside the window.
  void advance(duration d);
  void set(time_point t);  // never moves backwards
  // Runs timers already due (for work scheduled "now" from another thread).
  void run_due();

  std::size_t pending_timers() const;
  // Test helper: blocks until at least `n` timers are pending (a thread has
  // gone to sleep on this clock). Waits on real time, at most `limit`.
  bool wait_for_timers(std::size_t n, duration limit = std::chrono::seconds(10)) const;
  // Test helper: blocks until a timer due at exactly `when` is pending (a
  // thread waits for that time). Waits on real time, at most `limit`.
  bool wait_for_timer_at(time_point when, duration limit = std::chrono::seconds(10)) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  time_point now_;
  timer_queue timers_;
};

}  // namespace hourglass
