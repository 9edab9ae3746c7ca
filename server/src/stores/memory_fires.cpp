#include "stores/memory_fires.hpp"

#include <chrono>

namespace hourglass::server::detail {

memory_fires::memory_fires(hourglass::clock& clk)
    : clk_(clk),
      clk_at_start_(clk.now()),
      wall_at_start_(std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now())) {}

support::wall_time memory_fires::wall_now() const {
  return wall_at_start_ + std::chrono::duration_cast<std::chrono::microseconds>(elapsed(clk_at_start_, clk_.now()));
}

schedule_tick memory_fires::tick(const schedule& s, const std::function<bool(const std::string&)>& unfinished,
                                 const std::function<std::optional<std::string>(duration fresh_for)>& enqueue) {
  const support::wall_time now = wall_now();
  schedule_tick t;
  std::unique_lock lock(mu_);
  fire_record& r = records_[s.opts.name];  // a map's elements stay put: held across the unlock below
  if (!r.seen) {                           // a schedule first seen: its fires from now on
    r.seen = true;
    r.settled = now;
  }
  const fire_plan plan = plan_fires(s, r.settled, now);
  if (plan.last_due) {
    r.settled = *plan.last_due;
    r.state.last_fire = plan.last_due;
  }
  r.state.next_fire = plan.next;
  t.missed = plan.missed;
  const std::string previous = r.state.last_job;
  lock.unlock();
  if (plan.run) {
    if (!s.opts.allow_overlap && !previous.empty() && unfinished(previous)) {
      t.skipped_overlap = 1;  // the previous fire's job is still queued, scheduled or running
    } else if (const std::optional<std::string> id = enqueue(plan.fresh_for)) {
      if (id->empty()) {
        t.missed += 1;  // refused at admission (or the store is full): this fire will not run
      } else {
        t.enqueued = 1;
        lock.lock();
        r.state.last_job = *id;
        lock.unlock();
      }
    }
  }
  lock.lock();
  t.state = r.state;
  return t;
}

}  // namespace hourglass::server::detail
