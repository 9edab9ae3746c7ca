#include "overload/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <ostream>
#include <sstream>
#include <utility>

#include "hourglass/support/json.hpp"

namespace hourglass::bench {

namespace {

std::string num(double v, int digits = 6) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string pad(const std::string& s, std::size_t w, bool right = true) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

// "key": v as %.<digits>g (null when not finite), and a list of such numbers.
void number(support::json_writer& j, std::string_view key, double v, int digits = 6) { j.key(key).general(v, digits); }

void number_fields(support::json_writer& j, std::initializer_list<std::pair<std::string_view, double>> fields) {
  for (const auto& [key, v] : fields) number(j, key, v);
}

void numbers(support::json_writer& j, std::string_view key, const std::vector<double>& v) {
  j.key(key).begin_array();
  for (const double x : v) j.general(x);
  j.end_array();
}

const char* colour(const std::string& policy) {
  if (policy == "hourglass") return "#1a9850";
  if (policy == "fifo") return "#f46d43";
  if (policy == "asio") return "#5e4fa2";
  return "#444444";
}

}  // namespace

void print_table(std::ostream& out, const overload_report& r) {
  const auto& o = r.options;
  out << "overload: service time " << fixed(to_millis(o.service_time), 3) << " ms, budget "
      << fixed(to_millis(o.budget), 3) << " ms, min useful budget " << fixed(to_millis(o.min_budget), 3) << " ms, "
      << o.workers << " worker(s), queue capacity " << o.queue_capacity << ", " << fixed(to_seconds(o.run_length), 2)
      << " s per run, generator wakes at most every " << fixed(to_millis(o.send_quantum), 3) << " ms\n";
  out << "capacity " << fixed(r.capacity_rps, 0) << " jobs/s (closed loop; nominal workers/service time "
      << fixed(r.nominal_capacity_rps, 0) << "; measured again after the runs: " << fixed(r.capacity_after_rps, 0)
      << ")\n";
  if (r.capacity_rps > 0 && std::abs(r.capacity_after_rps / r.capacity_rps - 1) > 0.05) {
    out << "WARNING: capacity changed by more than 5 % during the experiment: the machine's load changed\n";
  }
  out << "\n";
  const char* head[] = {"policy",     "load",   "offered/s",  "goodput/s", "/capacity",  "wasted",
                        "p50 ms",     "p99 ms", "p999 ms",    "rej full",  "rej budget", "exp queue",
                        "cancel run", "late",   "lag p99 ms", "valid"};
  const std::size_t w[] = {9, 5, 10, 10, 9, 7, 8, 8, 8, 9, 10, 9, 10, 7, 10, 5};
  for (std::size_t i = 0; i < std::size(head); ++i)
    out << pad(head[i], w[i], i != 0) << (i + 1 < std::size(head) ? "  " : "\n");
  for (const auto& x : r.runs) {
    const std::string cells[] = {x.policy,
                                 num(x.load, 3),
                                 fixed(x.offered_rps, 0),
                                 fixed(x.goodput_rps, 0),
                                 fixed(x.goodput_ratio, 3),
                                 fixed(100 * x.wasted_work_ratio, 1) + "%",
                                 fixed(x.p50_ms, 2),
                                 fixed(x.p99_ms, 2),
                                 fixed(x.p999_ms, 2),
                                 std::to_string(x.counts.rejected_queue_full),
                                 std::to_string(x.counts.rejected_budget),
                                 std::to_string(x.counts.expired_queue),
                                 std::to_string(x.counts.cancelled_run),
                                 std::to_string(x.counts.completed_late),
                                 fixed(x.send_lag_p99_ms, 3),
                                 x.valid ? "yes" : "NO"};
    for (std::size_t i = 0; i < std::size(cells); ++i) {
      out << pad(cells[i], w[i], i != 0) << (i + 1 < std::size(cells) ? "  " : "\n");
    }
  }
  if (!r.steps.empty()) {
    out << "\nstep run: ";
    for (std::size_t i = 0; i < o.step_loads.size(); ++i) out << (i ? " -> " : "") << num(o.step_loads[i], 3) << "x";
    out << ", " << fixed(to_seconds(o.step_phase), 2) << " s each; recovery = time after the drop until every arrival"
        << " is good again (2 x budget = " << fixed(2 * to_millis(o.budget), 1) << " ms)\n";
    for (const auto& s : r.steps) {
      out << "  " << pad(s.policy, 9, false) << "  recovery "
          << (s.recovery_ms ? pad(fixed(*s.recovery_ms, 1), 8) + " ms" : std::string("   never   "))
          << "  good/offered after the drop " << fixed(s.goodput_after_drop_ratio, 3) << "  wasted "
          << fixed(100 * s.wasted_work_ratio, 1) << "%" << (s.valid ? "" : "  INVALID") << "\n";
      const auto& c = s.counts;
      out << "             all: offered " << c.offered << ", good " << c.good << ", rejected queue_full "
          << c.rejected_queue_full << ", insufficient budget " << c.rejected_budget << ", expired in queue "
          << c.expired_queue << ", cancelled mid-run " << c.cancelled_run << ", completed late " << c.completed_late
          << ", cut off " << c.cut_off << "\n";
      const auto& a = s.after_drop;
      out << "      after drop: offered " << a.offered << ", good " << a.good << ", rejected "
          << a.rejected_queue_full + a.rejected_budget << ", expired in queue " << a.expired_queue
          << ", cancelled mid-run " << a.cancelled_run << ", completed late " << a.completed_late << "\n";
    }
  }
}

void write_run_json(support::json_writer& j, const run_result& x, std::optional<int> repeat) {
  const auto& c = x.counts;
  j.begin_object().member("policy", x.policy);
  if (repeat) j.member("repeat", *repeat);
  number_fields(j, {{"load", x.load},
                    {"offered_rps", x.offered_rps},
                    {"goodput_rps", x.goodput_rps},
                    {"goodput_ratio", x.goodput_ratio},
                    {"wasted_work_ratio", x.wasted_work_ratio},
                    {"p99_ms", x.p99_ms},
                    {"p50_ms", x.p50_ms},
                    {"p999_ms", x.p999_ms},
                    {"max_ms", x.max_ms}});
  j.member("offered", c.offered).member("ok_in_deadline", c.good);
  j.key("rejected").begin_object();
  j.member("queue_full", c.rejected_queue_full).member("insufficient_budget", c.rejected_budget);
  j.member("shutting_down", c.rejected_other).end_object();
  j.key("deadline_exceeded").begin_object();
  j.member("admission", c.rejected_budget).member("queue", c.expired_queue);
  j.member("run", c.cancelled_run + c.completed_late).end_object();
  j.member("completed_late", c.completed_late).member("cancelled_mid_run", c.cancelled_run);
  j.member("cut_off", c.cut_off).member("errors", c.errors);
  number_fields(j, {{"busy_s", x.busy_s},
                    {"wasted_s", x.wasted_s},
                    {"wasted_wall_ratio", x.wasted_wall_ratio},
                    {"nominal_rps", x.nominal_rps},
                    {"send_lag_p99_ms", x.send_lag_p99_ms},
                    {"send_lag_max_ms", x.send_lag_max_ms},
                    {"send_ratio", x.send_ratio}});
  j.member("valid", x.valid).end_object();
}

std::string to_json(const overload_report& r) {
  const auto& o = r.options;
  const double none = std::nan("");  // written as null
  support::json_writer j;
  j.begin_object();
  number(j, "capacity_rps", r.capacity_rps);
  j.key("runs").begin_array();
  for (const auto& x : r.runs) write_run_json(j, x);
  j.end_array();
  if (!r.steps.empty()) {
    j.key("step").begin_object();
    numbers(j, "loads", o.step_loads);
    number_fields(j, {{"phase_s", to_seconds(o.step_phase)}, {"bin_ms", r.step_bin_ms}, {"drop_s", r.step_drop_s}});
    j.key("policies").begin_array();
    for (const auto& s : r.steps) {
      j.begin_object().member("policy", s.policy);
      number_fields(j, {{"recovery_ms", s.recovery_ms.value_or(none)},
                        {"good_ratio_after_drop", s.goodput_after_drop_ratio},
                        {"wasted_work_ratio", s.wasted_work_ratio}});
      j.member("valid", s.valid);
      numbers(j, "goodput_rps", s.goodput_rps);
      numbers(j, "offered_rps", s.offered_rps);
      j.end_object();
    }
    j.end_array().end_object();
  }
  number_fields(j, {{"service_time_ms", to_millis(o.service_time)},
                    {"budget_ms", to_millis(o.budget)},
                    {"min_budget_ms", to_millis(o.min_budget)}});
  j.member("workers", o.workers).member("queue_capacity", o.queue_capacity);
  if (o.noise > 0) number_fields(j, {{"noise", o.noise}, {"noise_period_ms", to_millis(o.noise_period)}});
  number_fields(j, {{"send_quantum_ms", to_millis(o.send_quantum)},
                    {"duration_s", to_seconds(o.run_length)},
                    {"nominal_capacity_rps", r.nominal_capacity_rps},
                    {"capacity_after_rps", r.capacity_after_rps}});
  return j.end_object().take();
}

void write_csv(std::ostream& out, const overload_report& r) {
  const auto& o = r.options;
  out << "service_time_ms,budget_ms,workers,capacity_rps,policy,load,offered_rps,goodput_rps,goodput_ratio,"
         "wasted_work_ratio,p50_ms,p99_ms,p999_ms,max_ms,offered,ok_in_deadline,rejected_queue_full,"
         "rejected_insufficient_budget,expired_queue,cancelled_mid_run,completed_late,cut_off,errors,"
         "send_lag_p99_ms,send_ratio,valid\n";
  for (const auto& x : r.runs) {
    const auto& c = x.counts;
    out << num(to_millis(o.service_time)) << ',' << num(to_millis(o.budget)) << ',' << o.workers << ','
        << num(r.capacity_rps) << ',' << x.policy << ',' << num(x.load) << ',' << num(x.offered_rps) << ','
        << num(x.goodput_rps) << ',' << num(x.goodput_ratio) << ',' << num(x.wasted_work_ratio) << ',' << num(x.p50_ms)
        << ',' << num(x.p99_ms) << ',' << num(x.p999_ms) << ',' << num(x.max_ms) << ',' << c.offered << ',' << c.good
        << ',' << c.rejected_queue_full << ',' << c.rejected_budget << ',' << c.expired_queue << ',' << c.cancelled_run
        << ',' << c.completed_late << ',' << c.cut_off << ',' << c.errors << ',' << num(x.send_lag_p99_ms) << ','
        << num(x.send_ratio) << ',' << (x.valid ? 1 : 0) << '\n';
  }
}

std::string to_svg(const overload_report& r) {
  const auto& o = r.options;
  const double W = 920, panel_h = 340, top1 = 70, gap = 110;
  const bool has_step = !r.steps.empty();
  const double H = top1 + panel_h + (has_step ? gap + panel_h : 0) + 60;
  const double left = 80, right = 200, plot_w = W - left - right;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
    << ' ' << H << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"13\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << left << "\" y=\"28\" font-size=\"18\" font-weight=\"bold\">Goodput under overload: jobs"
    << " finished ok inside their deadline</text>\n";
  s << "<text x=\"" << left << "\" y=\"50\" fill=\"#555\">service time " << num(to_millis(o.service_time), 4)
    << " ms, deadline " << num(to_millis(o.budget), 4) << " ms after arrival, " << o.workers << " worker(s), capacity "
    << fixed(r.capacity_rps, 0) << " jobs/s, Poisson arrivals, " << num(to_seconds(o.run_length), 3)
    << " s per point</text>\n";

  // Panel 1: goodput / capacity against offered load (log x).
  double lo = 1e9, hi = 0, ymax = 1.1;
  for (double l : o.loads) lo = std::min(lo, l), hi = std::max(hi, l);
  for (const auto& x : r.runs) ymax = std::max(ymax, x.goodput_ratio * 1.05);
  lo /= 1.3;
  hi *= 1.3;
  const double y0 = top1 + panel_h;
  auto px = [&](double load) {
    return left + plot_w * (std::log(load) - std::log(lo)) / (std::log(hi) - std::log(lo));
  };
  auto py = [&](double ratio) { return y0 - panel_h * ratio / ymax; };
  s << "<g stroke=\"#ddd\">\n";
  for (double t = 0; t <= ymax + 1e-9; t += 0.2) {
    s << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << py(t) << "\" y2=\"" << py(t) << "\"/>\n";
  }
  s << "</g>\n";
  for (double t = 0; t <= ymax + 1e-9; t += 0.2) {
    s << "<text x=\"" << left - 8 << "\" y=\"" << py(t) + 4 << "\" text-anchor=\"end\">" << fixed(t, 1) << "</text>\n";
  }
  for (double l : o.loads) {
    s << "<line x1=\"" << px(l) << "\" x2=\"" << px(l) << "\" y1=\"" << y0 << "\" y2=\"" << y0 + 5
      << "\" stroke=\"#333\"/><text x=\"" << px(l) << "\" y=\"" << y0 + 20 << "\" text-anchor=\"middle\">" << num(l, 3)
      << "x</text>\n";
  }
  s << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << y0 << "\" y2=\"" << y0
    << "\" stroke=\"#333\"/><line x1=\"" << left << "\" x2=\"" << left << "\" y1=\"" << top1 << "\" y2=\"" << y0
    << "\" stroke=\"#333\"/>\n";
  s << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << y0 + 42
    << "\" text-anchor=\"middle\">offered load (multiple of capacity, log scale)</text>\n";
  s << "<text transform=\"translate(" << left - 52 << ',' << top1 + panel_h / 2
    << ") rotate(-90)\" text-anchor=\"middle\">goodput / capacity</text>\n";
  // The ideal: goodput = min(offered, capacity).
  s << "<polyline fill=\"none\" stroke=\"#999\" stroke-dasharray=\"5,4\" points=\"";
  for (double l = lo; l <= hi * 1.0001; l *= 1.05) s << px(l) << ',' << py(std::min(l, 1.0)) << ' ';
  s << "\"/>\n";
  std::vector<std::string> order;
  for (const auto& p : o.policies) order.push_back(p);
  double ly = top1 + 10;
  for (const auto& p : order) {
    s << "<polyline fill=\"none\" stroke=\"" << colour(p) << "\" stroke-width=\"2.5\" points=\"";
    for (const auto& x : r.runs) {
      if (x.policy == p) s << px(x.load) << ',' << py(x.goodput_ratio) << ' ';
    }
    s << "\"/>\n";
    for (const auto& x : r.runs) {
      if (x.policy != p) continue;
      s << "<circle cx=\"" << px(x.load) << "\" cy=\"" << py(x.goodput_ratio) << "\" r=\"4\" fill=\""
        << (x.valid ? colour(p) : "white") << "\" stroke=\"" << colour(p) << "\"><title>" << p << " at "
        << num(x.load, 3) << "x: goodput " << fixed(x.goodput_ratio, 3) << " of capacity, wasted "
        << fixed(100 * x.wasted_work_ratio, 1) << "%, p99 " << fixed(x.p99_ms, 2) << " ms"
        << (x.valid ? "" : " (invalid: generator fell behind)") << "</title></circle>\n";
    }
    s << "<line x1=\"" << left + plot_w + 20 << "\" x2=\"" << left + plot_w + 44 << "\" y1=\"" << ly << "\" y2=\"" << ly
      << "\" stroke=\"" << colour(p) << "\" stroke-width=\"3\"/><text x=\"" << left + plot_w + 50 << "\" y=\"" << ly + 4
      << "\">" << p << "</text>\n";
    ly += 22;
  }
  s << "<line x1=\"" << left + plot_w + 20 << "\" x2=\"" << left + plot_w + 44 << "\" y1=\"" << ly << "\" y2=\"" << ly
    << "\" stroke=\"#999\" stroke-dasharray=\"5,4\"/><text x=\"" << left + plot_w + 50 << "\" y=\"" << ly + 4
    << "\">ideal</text>\n";

  if (has_step) {
    const double top2 = y0 + gap;
    const double y2 = top2 + panel_h;
    std::size_t bins = 0;
    double rmax = 1;
    for (const auto& st : r.steps) {
      bins = std::max(bins, st.goodput_rps.size());
      for (double v : st.goodput_rps) rmax = std::max(rmax, v);
      for (double v : st.offered_rps) rmax = std::max(rmax, v);
    }
    rmax *= 1.08;
    const double bin_s = r.step_bin_ms / 1000.0;
    const double tmax = std::max(1e-9, bin_s * static_cast<double>(bins));
    auto tx = [&](double t) { return left + plot_w * t / tmax; };
    auto ty = [&](double v) { return y2 - panel_h * v / rmax; };
    s << "<text x=\"" << left << "\" y=\"" << top2 - 22 << "\" font-size=\"16\" font-weight=\"bold\">Step: ";
    for (std::size_t i = 0; i < o.step_loads.size(); ++i) s << (i ? " &#8594; " : "") << num(o.step_loads[i], 3) << "x";
    s << " capacity, goodput per " << num(r.step_bin_ms, 3) << " ms</text>\n";
    // Capacity line and the drop.
    s << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << ty(r.capacity_rps) << "\" y2=\""
      << ty(r.capacity_rps) << "\" stroke=\"#bbb\" stroke-dasharray=\"2,3\"/><text x=\"" << left + plot_w - 4
      << "\" y=\"" << ty(r.capacity_rps) - 5 << "\" text-anchor=\"end\" fill=\"#777\">capacity</text>\n";
    s << "<line x1=\"" << tx(r.step_drop_s) << "\" x2=\"" << tx(r.step_drop_s) << "\" y1=\"" << top2 << "\" y2=\"" << y2
      << "\" stroke=\"#bbb\"/><text x=\"" << tx(r.step_drop_s) + 4 << "\" y=\"" << top2 + 12
      << "\" fill=\"#777\">load drops</text>\n";
    s << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << y2 << "\" y2=\"" << y2
      << "\" stroke=\"#333\"/><line x1=\"" << left << "\" x2=\"" << left << "\" y1=\"" << top2 << "\" y2=\"" << y2
      << "\" stroke=\"#333\"/>\n";
    const double tstep = tmax > 4 ? 1.0 : 0.5;
    for (double t = 0; t <= tmax + 1e-9; t += tstep) {
      s << "<text x=\"" << tx(t) << "\" y=\"" << y2 + 18 << "\" text-anchor=\"middle\">" << num(t, 3) << "</text>\n";
    }
    for (int k = 0; k <= 4; ++k) {
      const double v = rmax / 1.08 * k / 4;
      s << "<text x=\"" << left - 8 << "\" y=\"" << ty(v) + 4 << "\" text-anchor=\"end\">" << fixed(v, 0)
        << "</text>\n";
    }
    s << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << y2 + 38 << "\" text-anchor=\"middle\">time (s)</text>\n";
    s << "<text transform=\"translate(" << left - 60 << ',' << top2 + panel_h / 2
      << ") rotate(-90)\" text-anchor=\"middle\">jobs/s</text>\n";
    // Offered (from the first series: every policy got the same arrivals).
    s << "<polyline fill=\"none\" stroke=\"#999\" stroke-dasharray=\"5,4\" points=\"";
    const auto& off = r.steps.front().offered_rps;
    for (std::size_t b = 0; b < off.size(); ++b) {
      s << tx(bin_s * static_cast<double>(b)) << ',' << ty(off[b]) << ' ' << tx(bin_s * static_cast<double>(b + 1))
        << ',' << ty(off[b]) << ' ';
    }
    s << "\"/>\n";
    double ly2 = top2 + 10;
    for (const auto& st : r.steps) {
      s << "<polyline fill=\"none\" stroke=\"" << colour(st.policy) << "\" stroke-width=\"2.5\" points=\"";
      for (std::size_t b = 0; b < st.goodput_rps.size(); ++b) {
        s << tx(bin_s * (static_cast<double>(b) + 0.5)) << ',' << ty(st.goodput_rps[b]) << ' ';
      }
      s << "\"/>\n";
      s << "<line x1=\"" << left + plot_w + 20 << "\" x2=\"" << left + plot_w + 44 << "\" y1=\"" << ly2 << "\" y2=\""
        << ly2 << "\" stroke=\"" << colour(st.policy) << "\" stroke-width=\"3\"/><text x=\"" << left + plot_w + 50
        << "\" y=\"" << ly2 + 4 << "\">" << st.policy << "</text><text x=\"" << left + plot_w + 50 << "\" y=\""
        << ly2 + 19 << "\" font-size=\"11\" fill=\"#555\">"
        << (st.recovery_ms ? "recovers in " + fixed(*st.recovery_ms, 1) + " ms"
                           : std::string("no recovery within the phase"))
        << "</text>\n";
      ly2 += 40;
    }
    s << "<line x1=\"" << left + plot_w + 20 << "\" x2=\"" << left + plot_w + 44 << "\" y1=\"" << ly2 << "\" y2=\""
      << ly2 << "\" stroke=\"#999\" stroke-dasharray=\"5,4\"/><text x=\"" << left + plot_w + 50 << "\" y=\"" << ly2 + 4
      << "\">offered</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

void print_table(std::ostream& out, const throughput_report& r) {
  out << "throughput: " << r.jobs << " empty jobs from one thread to " << r.workers << " worker(s), best of "
      << r.rounds << " interleaved rounds\n";
  const auto row = [&](const char* name, double v) {
    out << "  " << pad(name, 11, false) << pad(fixed(v, 0), 12) << " jobs/s   hourglass is "
        << fixed(r.hourglass / v, 2) << "x\n";
  };
  row("hourglass", r.hourglass);
  row("moodycamel", r.moodycamel);
  row("asio", r.asio);
  row("mutex", r.mutex);
  if (r.tbb > 0) row("tbb", r.tbb);
}

std::string to_json(const throughput_report& r) {
  support::json_writer j;
  j.begin_object();
  number_fields(j, {{"hourglass_jobs_per_s", r.hourglass},
                    {"moodycamel_jobs_per_s", r.moodycamel},
                    {"asio_jobs_per_s", r.asio},
                    {"mutex_jobs_per_s", r.mutex}});
  j.member("workers", r.workers).member("jobs", r.jobs).member("rounds", r.rounds);
  number(j, "hourglass_vs_asio", r.hourglass / r.asio, 4);
  number(j, "hourglass_vs_moodycamel", r.hourglass / r.moodycamel, 4);
  numbers(j, "hourglass_rounds", r.hourglass_rounds);
  numbers(j, "moodycamel_rounds", r.moodycamel_rounds);
  numbers(j, "asio_rounds", r.asio_rounds);
  numbers(j, "mutex_rounds", r.mutex_rounds);
  if (r.tbb > 0) {  // built with oneTBB
    number(j, "tbb_jobs_per_s", r.tbb);
    number(j, "hourglass_vs_tbb", r.hourglass / r.tbb, 4);
    numbers(j, "tbb_rounds", r.tbb_rounds);
  }
  return j.end_object().take();
}

}  // namespace hourglass::bench
