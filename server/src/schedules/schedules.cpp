#include "schedules/schedules.hpp"

#include <stdexcept>

namespace hourglass::server::detail {

schedule read_schedule(const schedule_options& o) {
  const std::string which = "schedule '" + o.name + "': ";
  schedule s;
  s.opts = o;
  const cron_reading c = parse_cron(o.cron);
  if (!c.expr) throw std::invalid_argument(which + c.error);
  s.cron = *c.expr;
  const std::optional<const date::time_zone*> zone = find_time_zone(o.zone);
  if (!zone) throw std::invalid_argument(which + "no time zone '" + o.zone + "' in the system's tzdata");
  s.zone = *zone;
  if (o.freshness && *o.freshness <= duration::zero()) throw std::invalid_argument(which + "freshness must be > 0");
  return s;
}

duration freshness_of(const schedule& s, support::wall_time fire) {
  if (s.opts.freshness) return *s.opts.freshness;
  const std::optional<support::wall_time> after = next_fire(s.cron, s.zone, fire);
  return after ? std::chrono::duration_cast<duration>(*after - fire) : duration::max();
}

fire_plan plan_fires(const schedule& s, support::wall_time settled_until, support::wall_time now) {
  fire_plan p;
  std::uint64_t due = 0;
  // A minutely schedule idle for a year walks 525,600 fires: once, and cheap.
  for (support::wall_time t = settled_until;;) {
    const std::optional<support::wall_time> f = next_fire(s.cron, s.zone, t);
    if (!f || *f > now) break;
    p.last_due = *f;
    ++due;
    t = *f;
  }
  p.missed = due;
  if (p.last_due) {
    const duration fresh = freshness_of(s, *p.last_due);
    const duration age = std::chrono::duration_cast<duration>(now - *p.last_due);
    if (age < fresh) {
      p.run = p.last_due;
      p.fresh_for = fresh - age;
      --p.missed;
    }
  }
  p.next = next_fire(s.cron, s.zone, now);
  return p;
}

}  // namespace hourglass::server::detail
