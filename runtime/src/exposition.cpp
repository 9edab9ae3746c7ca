#include "hourglass/exposition.hpp"

#include <charconv>
#include <cmath>

namespace hourglass {
namespace {

void append_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Exact decimal seconds from integer nanoseconds: 1500000000 -> "1.5", 42 -> "0.000000042".
void append_seconds(std::string& out, std::uint64_t ns) {
  append_uint(out, ns / 1'000'000'000);
  std::uint64_t frac = ns % 1'000'000'000;
  if (frac == 0) return;
  char digits[9];
  for (int i = 8; i >= 0; --i) {
    digits[i] = static_cast<char>('0' + frac % 10);
    frac /= 10;
  }
  int len = 9;
  while (digits[len - 1] == '0') --len;
  out.push_back('.');
  out.append(digits, static_cast<std::size_t>(len));
}

void append_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out.append("NaN");
  } else if (std::isinf(v)) {
    out.append(v > 0 ? "+Inf" : "-Inf");
  } else {
    char buf[32];  // the shortest round trip of a double takes at most 24
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
  }
}

// Appends `text` with each of `specials` replaced by its escape: the runs
// between them in one append each (a value rarely has any).
void append_escaped(std::string& out, std::string_view text, std::string_view specials) {
  for (;;) {
    const std::size_t at = text.find_first_of(specials);
    out.append(text.substr(0, at));
    if (at == std::string_view::npos) return;
    switch (text[at]) {
      case '\\': out.append("\\\\"); break;
      case '"': out.append("\\\""); break;
      default: out.append("\\n"); break;  // line feed
    }
    text.remove_prefix(at + 1);
  }
}

}  // namespace

std::string_view to_string(metric_type type) noexcept {
  switch (type) {
    case metric_type::counter: return "counter";
    case metric_type::gauge: return "gauge";
    case metric_type::histogram: return "histogram";
    case metric_type::summary: return "summary";
    case metric_type::untyped: return "untyped";
  }
  return "untyped";
}

void metric_value::append_to(std::string& out) const {
  switch (form_) {
    case form::integer:
      if (negative_) out.push_back('-');
      append_uint(out, magnitude_);
      return;
    case form::seconds:
      if (negative_) out.push_back('-');
      append_seconds(out, magnitude_);
      return;
    case form::floating: append_double(out, floating_); return;
  }
}

void append_escaped_label_value(std::string& out, std::string_view value) { append_escaped(out, value, "\\\"\n"); }

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  append_escaped_label_value(out, value);
  return out;
}

exposition_writer& exposition_writer::family(std::string_view name, metric_type type, std::string_view help) {
  std::string& out = *out_;
  out.append("# HELP ").append(name).push_back(' ');
  append_escaped(out, help, "\\\n");  // HELP text: backslash and line feed (double quotes stay)
  out.append("\n# TYPE ").append(name).push_back(' ');
  out.append(to_string(type)).push_back('\n');
  return *this;
}

exposition_writer& exposition_writer::sample(std::string_view name, metric_value v) {
  std::string& out = *out_;
  out.append(name).push_back(' ');
  v.append_to(out);
  out.push_back('\n');
  return *this;
}

exposition_writer& exposition_writer::sample(std::string_view name, std::initializer_list<metric_label> labels,
                                             metric_value v) {
  std::string& out = *out_;
  out.append(name);
  if (labels.size() != 0) {
    char sep = '{';
    for (const metric_label& l : labels) {
      out.push_back(sep);
      sep = ',';
      out.append(l.name).append("=\"");
      append_escaped_label_value(out, l.value);
      out.push_back('"');
    }
    out.push_back('}');
  }
  out.push_back(' ');
  v.append_to(out);
  out.push_back('\n');
  return *this;
}

exposition_writer& exposition_writer::gauge(std::string_view name, std::string_view help, metric_value v) {
  return family(name, metric_type::gauge, help).sample(name, v);
}

exposition_writer& exposition_writer::counter(std::string_view name, std::string_view help, metric_value v) {
  return family(name, metric_type::counter, help).sample(name, v);
}

}  // namespace hourglass
