// plan_fires(): which fires of a schedule to run, count missed or leave,
// as a pure function of (schedule, settled-until, now).
#include "schedules/schedules.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace hourglass::server::detail {
namespace {

using namespace std::chrono_literals;

support::wall_time at(const char* text) { return support::parse_rfc3339(text).value(); }

schedule hourly(std::optional<duration> freshness = std::nullopt) {
  schedule_options o;
  o.name = "report";
  o.cron = "0 * * * *";
  o.handler = "echo";
  o.freshness = freshness;
  return read_schedule(o);
}

TEST(PlanFires, NothingDueLeavesEverythingAndSaysTheNextFire) {
  const fire_plan p = plan_fires(hourly(), at("2026-12-05T10:00:00Z"), at("2026-12-05T10:30:00Z"));
  EXPECT_FALSE(p.run.has_value());
  EXPECT_FALSE(p.last_due.has_value());
  EXPECT_EQ(p.missed, 0u);
  EXPECT_EQ(p.next, at("2026-12-05T11:00:00Z"));
}

TEST(PlanFires, ADueFireRunsWithWhatIsLeftOfItsFreshnessByDefaultUntilTheNextFire) {
  const fire_plan p = plan_fires(hourly(), at("2026-12-05T10:00:00Z"), at("2026-12-05T11:00:05Z"));
  EXPECT_EQ(p.run, at("2026-12-05T11:00:00Z"));
  EXPECT_EQ(p.fresh_for, 1h - 5s);
  EXPECT_EQ(p.last_due, p.run);
  EXPECT_EQ(p.missed, 0u);
  EXPECT_EQ(p.next, at("2026-12-05T12:00:00Z"));
  EXPECT_FALSE(plan_fires(hourly(), at("2026-12-05T11:00:00Z"), at("2026-12-05T11:00:05Z")).run.has_value())
      << "settled: never run twice";
}

TEST(PlanFires, AfterDowntimeStaleFiresAreMissedAndAtMostTheLatestRuns) {
  // Down from 10:00 to 15:xx: fires at 11, 12, 13, 14 and 15 are due.
  const fire_plan fresh = plan_fires(hourly(10min), at("2026-12-05T10:00:00Z"), at("2026-12-05T15:05:00Z"));
  EXPECT_EQ(fresh.run, at("2026-12-05T15:00:00Z")) << "still inside its 10 minutes";
  EXPECT_EQ(fresh.fresh_for, 5min);
  EXPECT_EQ(fresh.missed, 4u) << "one run, never five";
  const fire_plan stale = plan_fires(hourly(10min), at("2026-12-05T10:00:00Z"), at("2026-12-05T15:10:00Z"));
  EXPECT_FALSE(stale.run.has_value()) << "exactly at its freshness's end: never run late";
  EXPECT_EQ(stale.missed, 5u);
  EXPECT_EQ(stale.last_due, at("2026-12-05T15:00:00Z")) << "settled up to here all the same";
}

TEST(PlanFires, AnIntervalScheduleFiresEverySecond) {
  schedule_options o;
  o.name = "tick";
  o.cron = "@every 1s";
  o.handler = "echo";
  const schedule s = read_schedule(o);
  const fire_plan p = plan_fires(s, at("2026-12-05T10:00:00Z"), at("2026-12-05T10:00:05.500Z"));
  EXPECT_EQ(p.run, at("2026-12-05T10:00:05Z"));
  EXPECT_EQ(p.fresh_for, 500ms);
  EXPECT_EQ(p.missed, 4u);
  EXPECT_EQ(p.next, at("2026-12-05T10:00:06Z"));
}

TEST(ReadSchedule, SaysWhichScheduleIsWrongAndWhy) {
  schedule_options o;
  o.name = "bad";
  o.handler = "echo";
  o.cron = "61 * * * *";
  EXPECT_THROW(read_schedule(o), std::invalid_argument);
  o.cron = "@daily";
  o.zone = "Mars/Olympus";
  try {
    read_schedule(o);
    ADD_FAILURE() << "an unknown zone was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "schedule 'bad': no time zone 'Mars/Olympus' in the system's tzdata");
  }
  o.zone = "Europe/Berlin";
  EXPECT_NE(read_schedule(o).zone, nullptr);
}

}  // namespace
}  // namespace hourglass::server::detail
