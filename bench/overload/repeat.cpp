#include "overload/repeat.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "hourglass/support/json.hpp"
#include "overload/report.hpp"

namespace hourglass::bench {

spread spread_of(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {median, v.front(), v.back()};
}

repeat_report summarize(std::vector<overload_report> reports) {
  repeat_report r;
  std::vector<double> capacities;
  for (const auto& rep : reports) {
    capacities.push_back(rep.capacity_rps);
    for (const auto& run : rep.runs) {
      const auto same = [&](const repeat_row& row) { return row.policy == run.policy && row.load == run.load; };
      if (std::find_if(r.rows.begin(), r.rows.end(), same) == r.rows.end()) {
        r.rows.push_back({run.policy, run.load, {}, {}, {}, 0, 0});
      }
    }
  }
  for (auto& row : r.rows) {
    std::vector<double> good, wasted, p99;
    for (const auto& rep : reports) {
      for (const auto& run : rep.runs) {
        if (run.policy != row.policy || run.load != row.load) continue;
        good.push_back(run.goodput_ratio);
        wasted.push_back(run.wasted_work_ratio);
        p99.push_back(run.p99_ms);
        ++row.runs;
        if (!run.valid) ++row.invalid;
      }
    }
    row.goodput_ratio = spread_of(good);
    row.wasted_work_ratio = spread_of(wasted);
    row.p99_ms = spread_of(p99);
  }
  r.capacity_rps = spread_of(capacities);
  r.reports = std::move(reports);
  return r;
}

void print_table(std::ostream& out, const repeat_report& r) {
  char line[256];
  std::snprintf(line, sizeof line, "%zu repetitions; capacity %.0f jobs/s median (%.0f-%.0f)\n", r.reports.size(),
                r.capacity_rps.median, r.capacity_rps.min, r.capacity_rps.max);
  out << line;
  out << "policy     load   goodput/capacity: median (min-max)   wasted work: median (min-max)   p99 ms median  "
         "runs\n";
  for (const auto& row : r.rows) {
    std::snprintf(line, sizeof line,
                  "%-9s %5.1fx   %6.3f (%5.3f-%5.3f)                 %5.1f%% (%4.1f%%-%4.1f%%)        "
                  "%8.2f    %zu%s\n",
                  row.policy.c_str(), row.load, row.goodput_ratio.median, row.goodput_ratio.min, row.goodput_ratio.max,
                  100 * row.wasted_work_ratio.median, 100 * row.wasted_work_ratio.min, 100 * row.wasted_work_ratio.max,
                  row.p99_ms.median, row.runs, row.invalid ? " (generator fell short in some)" : "");
    out << line;
  }
}

namespace {
void write_spread(support::json_writer& j, std::string_view key, const spread& s) {
  j.key(key).begin_object();
  j.key("median").general(s.median, 6);
  j.key("min").general(s.min, 6);
  j.key("max").general(s.max, 6);
  j.end_object();
}
}  // namespace

std::string to_json(const repeat_report& r) {
  support::json_writer j;
  j.begin_object().member("repeat", r.reports.size());
  j.key("capacity_rps").general(r.capacity_rps.median, 6);
  write_spread(j, "capacity_rps_spread", r.capacity_rps);
  j.key("runs").begin_array();
  for (std::size_t i = 0; i < r.reports.size(); ++i) {
    for (const auto& run : r.reports[i].runs) write_run_json(j, run, static_cast<int>(i));
  }
  j.end_array();
  j.key("summary").begin_array();
  for (const auto& row : r.rows) {
    j.begin_object().member("policy", row.policy);
    j.key("load").general(row.load, 6);
    write_spread(j, "goodput_ratio", row.goodput_ratio);
    write_spread(j, "wasted_work_ratio", row.wasted_work_ratio);
    write_spread(j, "p99_ms", row.p99_ms);
    j.member("runs", row.runs).member("invalid", row.invalid).end_object();
  }
  j.end_array();
  return j.end_object().take();
}

}  // namespace hourglass::bench
