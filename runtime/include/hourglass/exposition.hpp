// Prometheus text exposition format 0.0.4, written into a std::string.
//
// Every series hourglass exports is written through this one writer: the
// registry's families (render_prometheus, metrics.hpp) and the daemon's own
// (connections, async store, circuit breakers, hedges, fleet). It appends to a
// string the caller owns and allocates nothing of its own: names, help texts
// and labels are string_views, numbers go through std::to_chars on the stack,
// label values are escaped straight into the output. Only the output grows
// (reserve() it from the last page's size to make that one allocation).
//
// What it writes, per call:
//   family(name, type, help)    "# HELP <name> <help>\n# TYPE <name> <type>\n"
//                               (help escaped: \ -> \\, line feed -> \n)
//   sample(name, v)             "<name> <v>\n"
//   sample(name, labels, v)     "<name>{<l1>="<v1>",<l2>="<v2>"} <v>\n": labels in
//                               the order given, values escaped (\ -> \\, " -> \",
//                               line feed -> \n); no labels: no braces
//   gauge(name, help, v)        a gauge family with one unlabelled sample
//   counter(name, help, v)      a counter family with one unlabelled sample
//
// Values (metric_value, implicit from any integer or floating type):
//   integers                    exact decimal, signed or unsigned: "42", "-3"
//   floating                    shortest text that reads back as the same double
//                               ("0.25", "1e-07"); "+Inf", "-Inf", "NaN"
//   metric_value::seconds(d),   exact decimal seconds of whole nanoseconds, no
//   ::seconds_from_ns(ns)       exponent and no trailing zeros: 1500000000 ns ->
//                               "1.5", 42 ns -> "0.000000042", -2 ms -> "-0.002"
//
// The caller keeps the format's rules it cannot check cheaply: names are valid
// metric and label names (literals here), each family is written once, its
// samples follow its HELP and TYPE lines contiguously, a counter's name ends in
// _total, and label values are valid UTF-8 (metrics::handler() folds invalid
// names into "other").
//
// Usage:
//   std::string out;
//   exposition_writer w(out);
//   w.gauge("hourglass_queue_depth", "Jobs waiting in the queue.", depth);
//   w.family("hourglass_circuit_rejected_total", metric_type::counter, "Calls failed at once.");
//   for (const auto& [name, n] : rejected) w.sample("hourglass_circuit_rejected_total", {{"upstream", name}}, n);
//   w.family("hourglass_jobs_completed_late_seconds_total", metric_type::counter, "Worker time, in seconds.");
//   w.sample("hourglass_jobs_completed_late_seconds_total", {{"handler", "echo"}},
//            metric_value::seconds_from_ns(late_ns));
// gives
//   # HELP hourglass_queue_depth Jobs waiting in the queue.
//   # TYPE hourglass_queue_depth gauge
//   hourglass_queue_depth 3
//   # HELP hourglass_circuit_rejected_total Calls failed at once.
//   # TYPE hourglass_circuit_rejected_total counter
//   hourglass_circuit_rejected_total{upstream="search"} 7
//   ...
//
// Thread safety: a writer is a view of one string; use it from one thread at a
// time, like the string. The free functions are pure.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "hourglass/time.hpp"

namespace hourglass {

enum class metric_type { counter, gauge, histogram, summary, untyped };

// "counter", "gauge", "histogram", "summary", "untyped": the TYPE line's word.
std::string_view to_string(metric_type type) noexcept;

// One label of a sample; `value` unescaped (the writer escapes it).
struct metric_label {
  std::string_view name;
  std::string_view value;
};

// A sample's value, as the writer will print it (see "Values" above).
class metric_value {
 public:
  template <std::integral T>
  constexpr metric_value(T v) noexcept {  // NOLINT: implicit, so sample(name, n) takes any count
    if constexpr (std::is_signed_v<T>) {
      negative_ = v < 0;
      magnitude_ = negative_ ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
    } else {
      magnitude_ = static_cast<std::uint64_t>(v);
    }
  }
  template <std::floating_point T>
  constexpr metric_value(T v) noexcept  // NOLINT: implicit, as above
      : form_(form::floating), floating_(static_cast<double>(v)) {}

  // Exact decimal seconds of a duration (negative ones too).
  static constexpr metric_value seconds(duration d) noexcept {
    return metric_value(
        form::seconds, d.count() < 0,
        d.count() < 0 ? 0 - static_cast<std::uint64_t>(d.count()) : static_cast<std::uint64_t>(d.count()));
  }
  // Exact decimal seconds of a count of nanoseconds (a counter of them).
  static constexpr metric_value seconds_from_ns(std::uint64_t ns) noexcept {
    return metric_value(form::seconds, false, ns);
  }

  // Appends the value's text to `out`.
  void append_to(std::string& out) const;

 private:
  enum class form : unsigned char { integer, seconds, floating };
  constexpr metric_value(form f, bool negative, std::uint64_t magnitude) noexcept
      : form_(f), negative_(negative), magnitude_(magnitude) {}

  form form_ = form::integer;
  bool negative_ = false;
  std::uint64_t magnitude_ = 0;  // integer: |value|; seconds: |nanoseconds|
  double floating_ = 0;
};

// Appends the text format's escaped form of a label value: backslash, double
// quote and line feed become \\, \" and \n.
void append_escaped_label_value(std::string& out, std::string_view value);
// The same, as a new string.
std::string escape_label_value(std::string_view value);

// Writes families and samples at the end of `out` (see the top of this file).
class exposition_writer {
 public:
  explicit exposition_writer(std::string& out) noexcept : out_(&out) {}

  exposition_writer& family(std::string_view name, metric_type type, std::string_view help);
  exposition_writer& sample(std::string_view name, metric_value v);
  exposition_writer& sample(std::string_view name, std::initializer_list<metric_label> labels, metric_value v);
  exposition_writer& gauge(std::string_view name, std::string_view help, metric_value v);
  exposition_writer& counter(std::string_view name, std::string_view help, metric_value v);

  std::string& text() noexcept { return *out_; }

 private:
  std::string* out_;
};

}  // namespace hourglass
