#include "overload/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <ostream>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "hourglass/support/json.hpp"
#include "text.hpp"

namespace hourglass::bench {

namespace {

std::string num(double v, int digits = 6) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
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

// How a policy's line is drawn. fifo and asio often coincide (both near 0
// under overload), and all three do at light load, so they differ in more
// than colour: asio is a wide solid line, hourglass a narrower solid one,
// fifo a thin dashed one, each with a marker of its own; the widest is drawn
// first, so the narrower lines stay visible on top of it.
struct policy_style {
  const char* colour;
  double width;
  const char* dash;  // stroke-dasharray; "" for a solid line
  char marker;       // 'o' circle, 's' square, 'd' diamond
};

policy_style style(const std::string& policy) {
  if (policy == "hourglass") return {"#1a9850", 2.5, "", 'o'};
  if (policy == "fifo") return {"#f46d43", 2, "7,4", 's'};
  if (policy == "asio") return {"#5e4fa2", 5, "", 'd'};
  return {"#444444", 2.5, "", 'o'};
}

// True when policy a's line is drawn before (under) b's.
bool drawn_before(const std::string& a, const std::string& b) { return style(a).width > style(b).width; }

// The stroke attributes of a policy's line.
std::string stroke(const policy_style& ps) {
  std::string a = "stroke=\"" + std::string(ps.colour) + "\" stroke-width=\"" + num(ps.width) + "\"";
  if (*ps.dash) a += " stroke-dasharray=\"" + std::string(ps.dash) + "\"";
  return a;
}

// A policy's marker centred on (x, y), filled or hollow (white), with a tooltip.
std::string marker(const policy_style& ps, double x, double y, bool filled, const std::string& title) {
  const std::string paint = "fill=\"" + std::string(filled ? ps.colour : "white") + "\" stroke=\"" + ps.colour + "\"";
  std::string shape, tag;
  if (ps.marker == 's') {
    tag = "rect";
    shape = "<rect x=\"" + num(x - 3.5) + "\" y=\"" + num(y - 3.5) + "\" width=\"7\" height=\"7\"";
  } else if (ps.marker == 'd') {
    tag = "polygon";
    shape = "<polygon points=\"" + num(x) + ',' + num(y - 6.5) + ' ' + num(x + 6.5) + ',' + num(y) + ' ' + num(x) +
            ',' + num(y + 6.5) + ' ' + num(x - 6.5) + ',' + num(y) + "\"";
  } else {
    tag = "circle";
    shape = "<circle cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"4\"";
  }
  return shape + ' ' + paint + "><title>" + title + "</title></" + tag + ">";
}

// A legend's sample of a policy's line from x1 to x2 at y, its marker in the middle.
std::string legend_sample(const std::string& policy, double x1, double x2, double y) {
  const policy_style ps = style(policy);
  return "<line x1=\"" + num(x1) + "\" x2=\"" + num(x2) + "\" y1=\"" + num(y) + "\" y2=\"" + num(y) + "\" " +
         stroke(ps) + "/>" + marker(ps, (x1 + x2) / 2, y, true, policy);
}

// `text` broken at spaces into lines of at most `max_chars` characters; a
// longer word gets a line of its own, never cut.
std::vector<std::string> wrap_words(std::string_view text, std::size_t max_chars) {
  std::vector<std::string> lines;
  std::string line;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t end = std::min(text.find(' ', i), text.size());
    const std::string_view word = text.substr(i, end - i);
    if (!word.empty()) {
      if (!line.empty() && line.size() + 1 + word.size() > max_chars) lines.push_back(std::exchange(line, {}));
      if (!line.empty()) line += ' ';
      line += word;
    }
    i = end + 1;
  }
  if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

}  // namespace

std::vector<double> nice_ticks(double max, int max_steps) {
  if (!(max > 0) || !std::isfinite(max)) max = 1;
  max_steps = std::max(max_steps, 1);
  // units x 10^k, computed so that it is the double nearest that decimal.
  const auto scaled = [](long long units, int k) {
    const double p = std::pow(10.0, std::abs(k));
    return k < 0 ? static_cast<double>(units) / p : static_cast<double>(units) * p;
  };
  // The step, units x 10^k: from a decade below the raw step (in case log10
  // rounds up), the first of 1, 2, 5 x 10^k not below it.
  const double raw = max / max_steps;
  int k = static_cast<int>(std::floor(std::log10(raw))) - 1;
  long long units = 0;
  while (units == 0) {
    for (const long long f : {1LL, 2LL, 5LL}) {
      if (units == 0 && scaled(f, k) >= raw * (1 - 1e-9)) units = f;
    }
    if (units == 0) ++k;
  }
  const double step = scaled(units, k);
  const auto n = std::max(1LL, static_cast<long long>(std::ceil(max / step - 1e-9)));
  std::vector<double> ticks;
  for (long long i = 0; i <= n; ++i) ticks.push_back(scaled(i * units, k));
  return ticks;
}

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
  // The legend: a sample of each line, from x = sample_x1 to sample_x2, then its name at legend_x.
  const double sample_x1 = left + plot_w + 12, sample_x2 = left + plot_w + 44, legend_x = left + plot_w + 50;
  std::vector<std::string> order = o.policies;
  std::stable_sort(order.begin(), order.end(), drawn_before);
  for (const auto& p : order) {
    const policy_style ps = style(p);
    s << "<polyline fill=\"none\" " << stroke(ps) << " points=\"";
    for (const auto& x : r.runs) {
      if (x.policy == p) s << px(x.load) << ',' << py(x.goodput_ratio) << ' ';
    }
    s << "\"/>\n";
    for (const auto& x : r.runs) {
      if (x.policy != p) continue;
      const std::string title = p + " at " + num(x.load, 3) + "x: goodput " + fixed(x.goodput_ratio, 3) +
                                " of capacity, wasted " + fixed(100 * x.wasted_work_ratio, 1) + "%, p99 " +
                                fixed(x.p99_ms, 2) + " ms" + (x.valid ? "" : " (invalid: generator fell behind)");
      s << marker(ps, px(x.load), py(x.goodput_ratio), x.valid, title) << "\n";
    }
  }
  double ly = top1 + 10;
  for (const auto& p : o.policies) {
    s << legend_sample(p, sample_x1, sample_x2, ly) << "<text x=\"" << legend_x << "\" y=\"" << ly + 4 << "\">" << p
      << "</text>\n";
    ly += 22;
  }
  s << "<line x1=\"" << sample_x1 << "\" x2=\"" << sample_x2 << "\" y1=\"" << ly << "\" y2=\"" << ly
    << "\" stroke=\"#999\" stroke-dasharray=\"5,4\"/><text x=\"" << legend_x << "\" y=\"" << ly + 4
    << "\">ideal</text>\n";

  if (has_step) {
    const double top2 = y0 + gap;
    const double y2 = top2 + panel_h;
    std::size_t bins = 0;
    double vmax = r.capacity_rps;
    for (const auto& st : r.steps) {
      bins = std::max(bins, st.goodput_rps.size());
      for (double v : st.goodput_rps) vmax = std::max(vmax, v);
      for (double v : st.offered_rps) vmax = std::max(vmax, v);
    }
    // Round ticks (1, 2, 5 x 10^k); the axis ends at the first one above every value.
    const std::vector<double> yticks = nice_ticks(vmax, 6);
    const double rmax = yticks.back();
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
    for (const double v : yticks) {
      s << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << ty(v) << "\" y2=\"" << ty(v)
        << "\" stroke=\"#eee\"/><text x=\"" << left - 8 << "\" y=\"" << ty(v) + 4 << "\" text-anchor=\"end\">"
        << num(v, 12) << "</text>\n";
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
    std::vector<const step_series*> drawn;
    for (const auto& st : r.steps) drawn.push_back(&st);
    std::stable_sort(drawn.begin(), drawn.end(),
                     [](const step_series* a, const step_series* b) { return drawn_before(a->policy, b->policy); });
    for (const step_series* st : drawn) {
      s << "<polyline fill=\"none\" " << stroke(style(st->policy)) << " points=\"";
      for (std::size_t b = 0; b < st->goodput_rps.size(); ++b) {
        s << tx(bin_s * (static_cast<double>(b) + 0.5)) << ',' << ty(st->goodput_rps[b]) << ' ';
      }
      s << "\"/>\n";
    }
    // Each policy's note (11 px text) wraps to the legend's width, never cut: at
    // most 0.65 em a character (DejaVu Sans, the usual fallback, is the widest).
    const auto note_chars = static_cast<std::size_t>((W - legend_x - 6) / (0.65 * 11));
    double ly2 = top2 + 10;
    for (const auto& st : r.steps) {
      s << legend_sample(st.policy, sample_x1, sample_x2, ly2) << "<text x=\"" << legend_x << "\" y=\"" << ly2 + 4
        << "\">" << st.policy << "</text>\n";
      const std::string note = st.recovery_ms ? "recovers in " + fixed(*st.recovery_ms, 1) + " ms"
                                              : std::string("no recovery within the phase");
      double ny = ly2 + 19;
      for (const auto& line : wrap_words(note, note_chars)) {
        s << "<text x=\"" << legend_x << "\" y=\"" << ny << "\" font-size=\"11\" fill=\"#555\">" << line << "</text>\n";
        ny += 14;
      }
      ly2 = ny + 7;
    }
    s << "<line x1=\"" << sample_x1 << "\" x2=\"" << sample_x2 << "\" y1=\"" << ly2 << "\" y2=\"" << ly2
      << "\" stroke=\"#999\" stroke-dasharray=\"5,4\"/><text x=\"" << legend_x << "\" y=\"" << ly2 + 4
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
