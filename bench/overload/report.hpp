// How hourglass-bench shows its results: a table for people, one JSON line
// for programs (the keys docs/reference/cli.md lists first), CSV for
// spreadsheets, SVG for eyes.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "overload/overload.hpp"
#include "overload/throughput.hpp"

namespace hourglass::support {
class json_writer;
}

namespace hourglass::bench {

void print_table(std::ostream& out, const overload_report& r);
std::string to_json(const overload_report& r);
// One run's JSON object (docs/reference/cli.md's keys first); `repeat`: which repetition.
void write_run_json(support::json_writer& j, const run_result& x, std::optional<int> repeat = std::nullopt);
void write_csv(std::ostream& out, const overload_report& r);
// Two panels: goodput / capacity against offered load per policy, and the
// step run's goodput over time per policy.
std::string to_svg(const overload_report& r);

// Round ticks for an axis from 0 that must show `max`: 0, step, 2 step, ...,
// up to the first multiple of step at or above `max` (the axis's top). The
// step is the smallest 1, 2 or 5 x 10^k that covers `max` in at most
// `max_steps` steps (taken as 1 if smaller). Each tick is the double nearest
// its decimal value (0.6, not 0.6000000000000001). A `max` that is not a
// positive finite number is taken as 1. Pure: the step chart's y axis.
std::vector<double> nice_ticks(double max, int max_steps);

void print_table(std::ostream& out, const throughput_report& r);
std::string to_json(const throughput_report& r);

}  // namespace hourglass::bench
