// How hourglass-bench shows its results: a table for people, one JSON line
// for programs (protocol.md keys first), CSV for spreadsheets, SVG for eyes.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include "overload/overload.hpp"
#include "overload/throughput.hpp"

namespace hourglass::support {
class json_writer;
}

namespace hourglass::bench {

void print_table(std::ostream& out, const overload_report& r);
std::string to_json(const overload_report& r);
// One run's JSON object (protocol.md keys first); `repeat`: which repetition.
void write_run_json(support::json_writer& j, const run_result& x, std::optional<int> repeat = std::nullopt);
void write_csv(std::ostream& out, const overload_report& r);
// Two panels: goodput / capacity against offered load per policy, and the
// step run's goodput over time per policy.
std::string to_svg(const overload_report& r);

void print_table(std::ostream& out, const throughput_report& r);
std::string to_json(const throughput_report& r);

}  // namespace hourglass::bench
