// Periodic jobs: what a schedule is, and which of its fires to run, as a
// pure function of (the schedule, its last recorded fire, now). Both stores
// ask it: the memory store on the daemon's wall clock, the fleet on the
// broker's. Internal to the server.
//
// The rule, the point of a deadline-aware scheduler: a fire is worth running
// only while it is fresh (its freshness counted from the fire's time; by
// default until the schedule's next fire). A fire whose freshness ran out
// while nothing ran it (every daemon down, the queue paused) is counted
// missed and never run late; of many due fires at most the latest runs, so
// catching up never floods.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hourglass/server/options.hpp"
#include "hourglass/time.hpp"
#include "schedules/cron.hpp"

namespace hourglass::server::detail {

// A schedule of the daemon's options, read and checked.
struct schedule {
  schedule_options opts;
  cron_expression cron;
  const date::time_zone* zone = nullptr;  // nullptr: UTC
};

// Reads `o`; throws std::invalid_argument saying which schedule and why.
schedule read_schedule(const schedule_options& o);

// What to do about a schedule now.
struct fire_plan {
  std::optional<support::wall_time> run;       // the fire to run now: the latest due one, still fresh
  duration fresh_for{};                        // run: what is left of its freshness at `now`
  std::optional<support::wall_time> last_due;  // the latest due fire (run or missed): settled up to here
  std::uint64_t missed = 0;                    // due fires that will never run (the latest one too, if stale)
  std::optional<support::wall_time> next;      // the first fire after `now`
};

// The fires in (settled_until, now]: every one is settled by this plan,
// run or missed. A schedule first seen settles up to the moment it is
// seen: no fire before that is run or counted.
fire_plan plan_fires(const schedule& s, support::wall_time settled_until, support::wall_time now);

// How long the fire at `fire` stays worth running: the schedule's freshness,
// or until its next fire.
duration freshness_of(const schedule& s, support::wall_time fire);

}  // namespace hourglass::server::detail
