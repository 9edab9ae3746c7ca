// hourglass-bench soak: the verdict, and the table, JSON, CSV and SVG of a run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <ostream>
#include <sstream>
#include <thread>
#include <tuple>

#include "hourglass/budget_codec.hpp"
#include "hourglass/support/json.hpp"
#include "soak/soak.hpp"
#include "text.hpp"

namespace hourglass::bench {

namespace {

std::uint64_t total(const std::map<std::string, std::uint64_t>& m) {
  std::uint64_t n = 0;
  for (const auto& [k, v] : m) n += v;
  return n;
}

std::string counts(const std::map<std::string, std::uint64_t>& m) {
  std::string out;
  for (const auto& [k, v] : m) out += (out.empty() ? "" : " ") + k + " " + std::to_string(v);
  return out.empty() ? "none" : out;
}

void count_map(support::json_writer& j, std::string_view key, const std::map<std::string, std::uint64_t>& m) {
  j.key(key).begin_object();
  for (const auto& [k, v] : m) j.member(k, v);
  j.end_object();
}

std::uint64_t sync_answered(const http_report& s) {
  std::uint64_t n = s.ok + total(s.rejected) + total(s.deadline_exceeded);
  for (const auto& [code, count] : s.other_statuses) n += count;
  return n;
}

struct machine_load {
  unsigned cores = 0;
  double load_mean = not_measured;
  double load_max = not_measured;
  double max_late_ms = 0;
};

machine_load machine_of(const soak_report& r) {
  machine_load m;
  m.cores = std::max(1u, std::thread::hardware_concurrency());
  double sum = 0;
  int n = 0;
  for (const auto& s : r.samples) {
    m.max_late_ms = std::max(m.max_late_ms, s.late_ms);
    if (!std::isfinite(s.load_average)) continue;
    sum += s.load_average, ++n;
    m.load_max = std::isfinite(m.load_max) ? std::max(m.load_max, s.load_average) : s.load_average;
  }
  if (n > 0) m.load_mean = sum / n;
  return m;
}

// "(20, 40] s", to a tenth of a second when it is not whole.
std::string describe(const soak_window& w) {
  auto sec = [](double v) { return fixed(v, std::abs(v - std::round(v)) < 0.05 ? 0 : 1); };
  return "(" + sec(w.from_s) + ", " + sec(w.to_s) + "] s";
}

// "+12.5 %": the late mean against the early one, relative to the early one's size.
std::string percent_change(const resource_trend& t) {
  const double change = 100 * (t.late_mean - t.early_mean) / std::abs(t.early_mean);
  return (change >= 0 ? "+" : "") + fixed(change, 1) + " %";
}

using sample_value = std::function<double(const soak_sample&)>;

double fds_net(const soak_sample& s) { return s.fds - s.own_connections; }

// Mean of the measured values in (w.from_s, w.to_s]; NaN with fewer than two.
double window_mean(const std::vector<soak_sample>& samples, const soak_window& w, const sample_value& value) {
  double sum = 0;
  int n = 0;
  for (const auto& s : samples) {
    const double v = value(s);
    if (s.t_s > w.from_s && s.t_s <= w.to_s && std::isfinite(v)) sum += v, ++n;
  }
  return n >= 2 ? sum / n : not_measured;
}

struct resource_rule {
  const char* name;
  const char* what;
  sample_value value;
  double slack;
  bool judged;
};

// What is compared, and the absolute growth below which a ratio is noise
// (a few connections, one allocator arena): a leak passes both by far.
std::vector<resource_rule> resource_rules() {
  return {
      {"rss_kib", "resident memory (KiB)", [](const soak_sample& s) { return s.rss_kib; }, 2048, true},
      {"fds_net", "open fds less the soak's own connections", fds_net, 5, true},
      {"fds", "open fds (all, incl. the soak's connections)", [](const soak_sample& s) { return s.fds; }, 5, false},
      {"threads", "threads", [](const soak_sample& s) { return s.threads; }, 1, true},
      {"async_store", "async store size (jobs)", [](const soak_sample& s) { return s.async_store; }, 50, true},
  };
}

}  // namespace

soak_window early_window(double length_s) {
  if (length_s >= 180) return {60, 120};
  return {length_s / 3, 2 * length_s / 3};
}

soak_window late_window(double length_s) {
  if (length_s >= 180) return {length_s - 60, length_s};
  return {2 * length_s / 3, length_s};
}

void judge(soak_report& r) {
  const double length_s = to_seconds(r.options.length);
  r.early = early_window(length_s);
  r.late = late_window(length_s);
  r.trends.clear();
  r.failures.clear();
  auto fail = [&](std::string why) { r.failures.push_back(std::move(why)); };
  if (r.daemon_exited) fail("the daemon exited during the soak");

  const std::string windows = describe(r.early) + " -> " + describe(r.late);
  for (const auto& rule : resource_rules()) {
    resource_trend t;
    t.name = rule.name;
    t.what = rule.what;
    t.slack = rule.slack;
    t.judged = rule.judged;
    t.early_mean = window_mean(r.samples, r.early, rule.value);
    t.late_mean = window_mean(r.samples, r.late, rule.value);
    t.measured = std::isfinite(t.early_mean) && std::isfinite(t.late_mean);
    t.grew = t.measured && t.late_mean - t.early_mean > r.options.max_growth * std::abs(t.early_mean) &&
             t.late_mean - t.early_mean > t.slack;
    if (t.grew && t.judged) {
      fail(t.what + " grew: mean " + fixed(t.early_mean, 1) + " -> " + fixed(t.late_mean, 1) + " over " + windows +
           " (" + percent_change(t) + ", above " + fixed(100 * r.options.max_growth, 0) + " % and " +
           fixed(t.slack, 0) + ")");
    }
    r.trends.push_back(std::move(t));
  }

  const std::uint64_t sync_unanswered = r.sync.offered - std::min(r.sync.offered, sync_answered(r.sync));
  if (sync_unanswered != 0) {
    fail(std::to_string(sync_unanswered) + " of " + std::to_string(r.sync.offered) + " sync requests got no answer (" +
         std::to_string(r.sync.offered - r.sync.sent) +
         " never sent: the load generator fell behind; the rest timed out or lost their connection)");
  }
  if (r.async.answered != r.async.requests) {
    fail(std::to_string(r.async.requests - r.async.answered) + " of " + std::to_string(r.async.requests) +
         " async requests (submissions, polls) got no answer");
  }
  if (r.metrics_answered != r.metrics_requests) {
    fail(std::to_string(r.metrics_requests - r.metrics_answered) + " of " + std::to_string(r.metrics_requests) +
         " GET /metrics got no answer");
  }
  if (r.async.lost != 0) {
    fail(std::to_string(r.async.lost) +
         " accepted async jobs answered 404 within --async-ttl of being seen unfinished (lost)");
  }
  if (r.async.unresolved != 0) {
    fail(std::to_string(r.async.unresolved) + " accepted async jobs had not finished by the end of the drain");
  }
  if (r.async.kept_past_ttl != 0) {
    fail(std::to_string(r.async.kept_past_ttl) + " of " + std::to_string(r.async.ttl_checked) +
         " finished async jobs were still stored after --async-ttl (the store does not forget)");
  }
  if (r.slow.held != 0) {
    fail(std::to_string(r.slow.held) + " slow clients were still connected after " +
         format_human_duration(r.options.slow_hold) + " (the daemon did not cut them off; " +
         counts(r.slow.held_by_kind) + ")");
  }
  if (std::isfinite(r.in_flight_after) && r.in_flight_after != 0) {
    fail("jobs in flight after the soak, at a quiet moment: " + fixed(r.in_flight_after, 0) +
         " (admitted_total - finished_total should be 0)");
  }
}

void print_table(std::ostream& out, const soak_report& r) {
  const auto& o = r.options;
  out << "soak: " << fixed(to_seconds(o.length), 0) << " s at " << fixed(o.load, 1) << "x capacity ("
      << fixed(r.capacity_rps, 1) << " jobs/s, " << (r.capacity_measured ? "measured" : "given")
      << "): " << fixed(r.offered_rps, 1) << " jobs/s offered, " << fixed(100 * o.async_share, 0) << " % async, spin "
      << o.spin_us << " us, budget " << format_human_duration(o.budget) << ", " << fixed(o.slow_rate, 1)
      << " misbehaving connections/s\n";
  out << "windows: early " << describe(r.early) << ", late " << describe(r.late) << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-46s %12s %12s %9s  %s\n", "resource", "early mean", "late mean", "change",
                "verdict");
  out << line;
  for (const auto& t : r.trends) {
    const std::string change = t.measured ? percent_change(t) : "-";
    const char* verdict = !t.measured ? "not measured" : !t.judged ? "(shown only)" : t.grew ? "GREW" : "flat";
    std::snprintf(line, sizeof line, "  %-46s %12s %12s %9s  %s\n", t.what.c_str(), fixed(t.early_mean, 1).c_str(),
                  fixed(t.late_mean, 1).c_str(), change.c_str(), verdict);
    out << line;
  }
  const auto& s = r.sync;
  out << "sync:  offered " << s.offered << ", answered " << sync_answered(s) << " (ok " << s.ok << ", in deadline "
      << s.ok_in_deadline << ", rejected " << total(s.rejected) << ", deadline_exceeded " << total(s.deadline_exceeded)
      << ", other " << (sync_answered(s) - s.ok - total(s.rejected) - total(s.deadline_exceeded)) << "), not sent "
      << (s.offered - s.sent) << "\n       rejected: " << counts(s.rejected)
      << "; deadline_exceeded by stage: " << counts(s.deadline_exceeded) << "\n";
  const auto& a = r.async;
  out << "async: submitted " << a.submitted << " (accepted " << a.accepted << ", refused " << a.refused
      << "), finished " << a.finished << ", lost " << a.lost << ", expired unseen " << a.expired_unseen
      << ", unresolved " << a.unresolved << "; requests " << a.requests << ", answered " << a.answered
      << "; TTL checks " << a.ttl_checked << ", kept past TTL " << a.kept_past_ttl
      << "\n       final states: " << counts(a.final_states) << "\n";
  const auto& w = r.slow;
  out << "misbehaving clients: opened " << w.opened << ", closed by the daemon " << w.closed_by_server << " (slowest "
      << fixed(w.max_close_s, 1) << " s), held " << w.held << " (" << counts(w.held_by_kind) << "), abandoned "
      << w.abandoned << ", cut short by the end " << w.cut_short << ", connect failed " << w.connect_failed << "\n";
  const machine_load m = machine_of(r);
  out << "machine: " << m.cores << " cores, load average mean " << fixed(m.load_mean, 2) << ", max "
      << fixed(m.load_max, 2) << "; samples late by up to " << fixed(m.max_late_ms, 0)
      << " ms (a load above the core count: others shared the CPU)\n";
  out << "metrics: " << r.metrics_answered << " of " << r.metrics_requests << " answered; async store gauge '"
      << o.store_metric << "' " << (r.store_metric_found ? "found" : "not exported by the daemon")
      << "; jobs in flight after the drain " << fixed(r.in_flight_after, 0) << "\n";
  for (const auto& e : r.unanswered_examples) out << "  unanswered: " << e << "\n";
  if (r.passed()) {
    out << "verdict: PASS\n";
  } else {
    for (const auto& f : r.failures) out << "FAIL: " << f << "\n";
    out << "verdict: FAIL\n";
  }
}

std::string to_json(const soak_report& r) {
  support::json_writer j;
  j.begin_object().member("verdict", r.passed() ? "pass" : "fail");
  j.key("failures").begin_array();
  for (const auto& f : r.failures) j.value(f);
  j.end_array();
  j.member("duration_s", to_seconds(r.options.length)).member("capacity_rps", r.capacity_rps);
  j.member("capacity_measured", r.capacity_measured).member("load", r.options.load);
  j.member("offered_rps", r.offered_rps);
  j.key("windows").begin_object();
  j.key("early").begin_array().value(r.early.from_s).value(r.early.to_s).end_array();
  j.key("late").begin_array().value(r.late.from_s).value(r.late.to_s).end_array();
  j.end_object();
  j.key("resources").begin_object();
  for (const auto& t : r.trends) {
    j.key(t.name).begin_object().member("early", t.early_mean).member("late", t.late_mean);
    j.member("judged", t.judged).member("grew", t.grew).end_object();
  }
  j.end_object();
  j.key("async_store_metric");
  if (r.store_metric_found) {
    j.value(r.options.store_metric);
  } else {
    j.null();
  }
  const auto& s = r.sync;
  j.key("sync").begin_object().member("offered", s.offered).member("answered", sync_answered(s));
  j.member("not_sent", s.offered - s.sent).member("ok", s.ok).member("ok_in_deadline", s.ok_in_deadline);
  count_map(j, "rejected", s.rejected);
  count_map(j, "deadline_exceeded", s.deadline_exceeded);
  j.end_object();
  const auto& a = r.async;
  j.key("async").begin_object().member("submitted", a.submitted).member("accepted", a.accepted);
  j.member("refused", a.refused).member("finished", a.finished).member("lost", a.lost);
  j.member("expired_unseen", a.expired_unseen);
  j.member("unresolved", a.unresolved).member("requests", a.requests).member("answered", a.answered);
  j.member("ttl_checked", a.ttl_checked).member("kept_past_ttl", a.kept_past_ttl);
  count_map(j, "final_states", a.final_states);
  j.end_object();
  const auto& w = r.slow;
  j.key("slow").begin_object().member("opened", w.opened).member("closed_by_server", w.closed_by_server);
  j.member("held", w.held).member("abandoned", w.abandoned).member("cut_short", w.cut_short);
  j.member("connect_failed", w.connect_failed).member("max_close_s", w.max_close_s);
  count_map(j, "held_by_kind", w.held_by_kind);
  j.end_object();
  const machine_load m = machine_of(r);
  j.key("machine").begin_object().member("cores", m.cores).member("load_average_mean", m.load_mean);
  j.member("load_average_max", m.load_max).member("max_sample_late_ms", m.max_late_ms).end_object();
  j.key("metrics").begin_object().member("requests", r.metrics_requests);
  j.member("answered", r.metrics_answered).end_object();
  j.member("in_flight_after", r.in_flight_after);
  return j.end_object().take();
}

void write_csv(std::ostream& out, const soak_report& r) {
  out << "t_s,rss_kib,fds,own_connections,fds_net,threads,async_store,queue_depth,workers_busy,in_flight,"
         "admitted_total,rejected_total,finished_total,async_requests,async_answered,async_backlog,slow_open,"
         "load_average,late_ms\n";
  auto cell = [&](double v) { out << (std::isfinite(v) ? fixed(v, 0) : std::string()) << ','; };
  for (const auto& s : r.samples) {
    cell(s.t_s), cell(s.rss_kib), cell(s.fds), cell(s.own_connections), cell(fds_net(s)), cell(s.threads);
    cell(s.async_store), cell(s.queue_depth), cell(s.workers_busy), cell(s.in_flight), cell(s.admitted_total);
    cell(s.rejected_total), cell(s.finished_total);
    out << s.async_offered << ',' << s.async_answered << ',' << s.async_backlog << ',' << s.slow_open << ','
        << (std::isfinite(s.load_average) ? fixed(s.load_average, 2) : std::string()) << ',' << fixed(s.late_ms, 1)
        << '\n';
  }
}

std::string to_svg(const soak_report& r) {
  // The layout and look of the overload chart (overload/report.cpp).
  const double W = 920, panel_h = 260, top1 = 100, gap = 90, left = 80, right = 200, plot_w = W - left - right;
  const double H = top1 + 2 * panel_h + gap + 60;
  const double tmax = std::max(1.0, to_seconds(r.options.length));
  auto tx = [&](double t) { return left + plot_w * t / tmax; };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
    << ' ' << H << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"13\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << left << "\" y=\"28\" font-size=\"18\" font-weight=\"bold\">Soak: hourglassd's memory and open"
    << " fds at " << fixed(r.options.load, 1) << "x capacity</text>\n";
  s << "<text x=\"" << left << "\" y=\"50\" fill=\"#555\">" << fixed(tmax, 0) << " s, capacity "
    << fixed(r.capacity_rps, 0) << " jobs/s, " << fixed(r.offered_rps, 0) << " jobs/s offered ("
    << fixed(100 * r.options.async_share, 0) << " % async), " << fixed(r.options.slow_rate, 1)
    << " misbehaving connections/s; verdict " << (r.passed() ? "pass" : "FAIL") << "</text>\n";

  struct series {
    const char* label;
    const char* colour;
    sample_value value;
    double scale;
  };
  auto panel = [&](double top, const char* title, const std::vector<series>& lines, const char* judged) {
    const double y0 = top + panel_h;
    double vmax = 1;
    for (const auto& l : lines)
      for (const auto& x : r.samples) {
        const double v = l.value(x) / l.scale;
        if (std::isfinite(v)) vmax = std::max(vmax, v);
      }
    // Gridlines on a 1-2-5 step, the top one above every value.
    const double raw_step = vmax / 4;
    const double magnitude = std::pow(10, std::floor(std::log10(raw_step)));
    const double step = raw_step <= magnitude       ? magnitude
                        : raw_step <= 2 * magnitude ? 2 * magnitude
                        : raw_step <= 5 * magnitude ? 5 * magnitude
                                                    : 10 * magnitude;
    const int ticks = static_cast<int>(std::ceil(vmax / step));
    vmax = step * ticks;
    auto ty = [&](double v) { return y0 - panel_h * v / vmax; };
    s << "<text x=\"" << left << "\" y=\"" << top - 12 << "\" font-size=\"15\" font-weight=\"bold\">" << title
      << "</text>\n";
    // The compared windows, shaded and named.
    for (const auto& [w, fill, name] :
         {std::tuple{r.early, "#e8f0fa", "early"}, std::tuple{r.late, "#fbeee6", "late"}}) {
      s << "<rect x=\"" << tx(w.from_s) << "\" y=\"" << top << "\" width=\"" << tx(w.to_s) - tx(w.from_s)
        << "\" height=\"" << panel_h << "\" fill=\"" << fill << "\"/><text x=\"" << (tx(w.from_s) + tx(w.to_s)) / 2
        << "\" y=\"" << top + 14 << "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#777\">" << name
        << " window</text>\n";
    }
    for (int k = 0; k <= ticks; ++k) {
      const double v = step * k;
      s << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << ty(v) << "\" y2=\"" << ty(v)
        << "\" stroke=\"#ddd\"/><text x=\"" << left - 8 << "\" y=\"" << ty(v) + 4 << "\" text-anchor=\"end\">"
        << fixed(v, step < 1 ? 1 : 0) << "</text>\n";
    }
    const double tstep = tmax > 300 ? 60 : tmax > 60 ? 30 : 10;
    for (double t = 0; t <= tmax + 1e-9; t += tstep) {
      s << "<text x=\"" << tx(t) << "\" y=\"" << y0 + 18 << "\" text-anchor=\"middle\">" << fixed(t, 0) << "</text>\n";
    }
    s << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << y0 << "\" y2=\"" << y0
      << "\" stroke=\"#333\"/><line x1=\"" << left << "\" x2=\"" << left << "\" y1=\"" << top << "\" y2=\"" << y0
      << "\" stroke=\"#333\"/>\n";
    s << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << y0 + 36 << "\" text-anchor=\"middle\">time (s)</text>\n";
    double ly = top + 10;
    for (const auto& l : lines) {
      s << "<polyline fill=\"none\" stroke=\"" << l.colour << "\" stroke-width=\"2\" points=\"";
      for (const auto& x : r.samples) {
        const double v = l.value(x) / l.scale;
        if (std::isfinite(v)) s << tx(x.t_s) << ',' << ty(v) << ' ';
      }
      s << "\"/>\n";
      s << "<line x1=\"" << left + plot_w + 20 << "\" x2=\"" << left + plot_w + 44 << "\" y1=\"" << ly << "\" y2=\""
        << ly << "\" stroke=\"" << l.colour << "\" stroke-width=\"3\"/><text x=\"" << left + plot_w + 50 << "\" y=\""
        << ly + 4 << "\">" << l.label << "</text>\n";
      ly += 22;
    }
    // The judged series' window means, dashed over their windows.
    for (const auto& t : r.trends) {
      if (t.name != judged || !t.measured) continue;
      const double scale = lines.front().scale;
      for (const auto& [w, mean] : {std::pair{r.early, t.early_mean}, std::pair{r.late, t.late_mean}}) {
        s << "<line x1=\"" << tx(w.from_s) << "\" x2=\"" << tx(w.to_s) << "\" y1=\"" << ty(mean / scale) << "\" y2=\""
          << ty(mean / scale) << "\" stroke=\"#000\" stroke-dasharray=\"5,4\"><title>mean " << fixed(mean / scale, 2)
          << "</title></line>\n";
      }
      s << "<text x=\"" << left + plot_w + 20 << "\" y=\"" << ly + 4 << "\" font-size=\"11\" fill=\"#555\">"
        << "dashed: window means</text><text x=\"" << left + plot_w + 20 << "\" y=\"" << ly + 19
        << "\" font-size=\"11\" fill=\"#555\">" << (t.grew ? "GREW" : "flat") << " (" << percent_change(t)
        << ")</text>\n";
    }
  };
  panel(top1, "Resident memory (MiB)", {{"RSS", "#1a9850", [](const soak_sample& x) { return x.rss_kib; }, 1024}},
        "rss_kib");
  panel(top1 + panel_h + gap, "Open file descriptors",
        {{"fds less own conns", "#5e4fa2", fds_net, 1},
         {"fds (all)", "#f46d43", [](const soak_sample& x) { return x.fds; }, 1},
         {"soak's connections", "#999999", [](const soak_sample& x) { return x.own_connections; }, 1}},
        "fds_net");
  s << "</svg>\n";
  return s.str();
}

}  // namespace hourglass::bench
