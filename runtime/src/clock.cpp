#include "hourglass/clock.hpp"

#include <condition_variable>

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace hourglass {

void request_precise_timed_waits() noexcept {
#ifdef __linux__
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
}

void clock::sleep_until(time_point when) {
  if (now() >= when) return;
  std::mutex mu;
  std::condition_variable cv;
  bool fired = false;
  const timer_id id = schedule(when, [&] {
    std::lock_guard lock(mu);
    fired = true;
    cv.notify_all();
  });
  // `when` passed between the reading above and the schedule: a
  // manual_clock runs a timer in its past only at its next advance().
  if (now() >= when && cancel(id)) return;
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return fired; });
}

timer_id timer_queue::push(time_point when, std::function<void()> fn) {
  timer_id id{when, next_seq_++};
  timers_.emplace(std::make_pair(when, id.seq), std::move(fn));
  return id;
}

bool timer_queue::erase(timer_id id) noexcept { return id && timers_.erase(std::make_pair(id.when, id.seq)) == 1; }

time_point timer_queue::next_due() const noexcept { return timers_.empty() ? never : timers_.begin()->first.first; }

bool timer_queue::has_due_at(time_point when) const noexcept {
  const auto it = timers_.lower_bound(std::make_pair(when, std::uint64_t{0}));
  return it != timers_.end() && it->first.first == when;
}

std::function<void()> timer_queue::pop_due(time_point now) {
  if (timers_.empty() || timers_.begin()->first.first > now) return {};
  auto node = timers_.extract(timers_.begin());
  return std::move(node.mapped());
}

steady_clock_service::~steady_clock_service() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

timer_id steady_clock_service::schedule(time_point when, std::function<void()> fn) {
  std::lock_guard lock(mu_);
  const timer_id id = timers_.push(when, std::move(fn));
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  // Wake the thread only when it would otherwise sleep past `when`. A job's
  // deadline timer is usually later than the one the thread already waits
  // for (often a cancelled one): it is picked up at that wake-up instead, so
  // a busy executor costs the timer thread one wake-up per job, not two.
  if (when < planned_wake_) {
    planned_wake_ = when;
    wake_.notify_one();
  }
  return id;
}

bool steady_clock_service::cancel(timer_id id) noexcept {
  std::lock_guard lock(mu_);
  return timers_.erase(id);
}

void steady_clock_service::run() {
  request_precise_timed_waits();  // every deadline of the process fires from this thread
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (auto fn = timers_.pop_due(now())) {
      lock.unlock();
      fn();
      fn = nullptr;  // destroy captures outside the lock too
      lock.lock();
      continue;
    }
    const time_point due = timers_.next_due();
    planned_wake_ = due;
    if (due == never) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, due);
    }
    planned_wake_ = time_point::min();  // awake: schedule() need not notify
  }
}

steady_clock_service& real_clock() {
  static steady_clock_service instance;
  return instance;
}

time_point manual_clock::now() const noexcept {
  std::lock_guard lock(mu_);
  return now_;
}

timer_id manual_clock::schedule(time_point when, std::function<void()> fn) {
  std::lock_guard lock(mu_);
  const timer_id id = timers_.push(when, std::move(fn));
  changed_.notify_all();
  return id;
}

bool manual_clock::cancel(timer_id id) noexcept {
  std::lock_guard lock(mu_);
  const bool erased = timers_.erase(id);
  if (erased) changed_.notify_all();
  return erased;
}

void manual_clock::advance(duration d) {
  time_point target;
  {
    std::lock_guard lock(mu_);
    target = saturating_add(now_, d);
  }
  set(target);
}

void manual_clock::set(time_point t) {
  // Step through due timers one at a time so each callback sees now() equal
  // to its own deadline, as it would on a real clock.
  for (;;) {
    std::function<void()> fn;
    {
      std::lock_guard lock(mu_);
      const time_point due = timers_.next_due();
      if (due <= t) {
        if (due > now_) now_ = due;
        fn = timers_.pop_due(now_);
      } else {
        if (t > now_) now_ = t;
      }
      changed_.notify_all();
    }
    if (!fn) return;
    fn();
  }
}

void manual_clock::run_due() { set(now()); }

std::size_t manual_clock::pending_timers() const {
  std::lock_guard lock(mu_);
  return timers_.size();
}

bool manual_clock::wait_for_timers(std::size_t n, duration limit) const {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, limit, [&] { return timers_.size() >= n; });
}

bool manual_clock::wait_for_timer_at(time_point when, duration limit) const {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, limit, [&] { return timers_.has_due_at(when); });
}

}  // namespace hourglass
