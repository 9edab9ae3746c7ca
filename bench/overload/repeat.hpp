// hourglass-bench overload --repeat N: the whole experiment N times (seeds
// seed .. seed + N - 1), summarised per (policy, load) as the median, min
// and max of goodput / capacity and of wasted work, so a single good (or
// bad) run is not mistaken for the rule. Each run's capacity is its own.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "overload/overload.hpp"

namespace hourglass::bench {

struct spread {
  double median = 0, min = 0, max = 0;
};
spread spread_of(
    std::vector<double> values);  // {0, 0, 0} when empty; median of an even count: the mean of the middle two

struct repeat_row {
  std::string policy;
  double load = 0;
  spread goodput_ratio, wasted_work_ratio, p99_ms;
  std::size_t runs = 0;
  std::size_t invalid = 0;  // runs whose generator fell short of the offered rate
};

struct repeat_report {
  std::vector<overload_report> reports;  // one per repetition, in order
  spread capacity_rps;
  std::vector<repeat_row> rows;  // in the order of the first repetition's runs
};

repeat_report summarize(std::vector<overload_report> reports);

void print_table(std::ostream& out, const repeat_report& r);
// {"repeat": N, "capacity_rps": median, "capacity_rps_spread": {...},
//  "runs": [every run, with "repeat": i], "summary": [per (policy, load)]}
std::string to_json(const repeat_report& r);

}  // namespace hourglass::bench
