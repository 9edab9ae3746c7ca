#include "hourglass/support/json.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cmath>
#include <cstdio>

#include "hourglass/utf8.hpp"

namespace hourglass::support {

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      const std::size_t n = utf8_sequence_length(s, i);
      if (n == 0) {
        out.append("\xEF\xBF\xBD");
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\n': out.append("\\n"); break;
      case '\r': out.append("\\r"); break;
      case '\t': out.append("\\t"); break;
      default:
        if (u < 0x20 || u == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", u);
          out.append(buf);
        } else {
          out.push_back(c);
        }
    }
    ++i;
  }
  out.push_back('"');
}

std::string base64(std::string_view bytes) {
  static constexpr char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  const auto at = [&](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 2 < bytes.size(); i += 3) {
    const std::uint32_t v = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
    out += table[v >> 18 & 63];
    out += table[v >> 12 & 63];
    out += table[v >> 6 & 63];
    out += table[v & 63];
  }
  if (i + 1 == bytes.size()) {
    const std::uint32_t v = at(i) << 16;
    out += table[v >> 18 & 63];
    out += table[v >> 12 & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const std::uint32_t v = at(i) << 16 | at(i + 1) << 8;
    out += table[v >> 18 & 63];
    out += table[v >> 12 & 63];
    out += table[v >> 6 & 63];
    out += '=';
  }
  return out;
}

// ---- json_writer -------------------------------------------------------------

void json_writer::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_.append(", ");
    first_.back() = false;
  }
}

json_writer& json_writer::open(char bracket) {
  separate();
  out_.push_back(bracket);
  first_.push_back(true);
  return *this;
}

json_writer& json_writer::close(char bracket) {
  out_.push_back(bracket);
  first_.pop_back();
  return *this;
}

json_writer& json_writer::key(std::string_view k) {
  separate();
  append_json_string(out_, k);
  out_.append(": ");
  after_key_ = true;
  return *this;
}

json_writer& json_writer::value(std::string_view s) {
  separate();
  append_json_string(out_, s);
  return *this;
}

json_writer& json_writer::value(std::int64_t v) { return raw(std::to_string(v)); }
json_writer& json_writer::value(std::uint64_t v) { return raw(std::to_string(v)); }
json_writer& json_writer::value(bool v) { return raw(v ? "true" : "false"); }
json_writer& json_writer::null() { return raw("null"); }
json_writer& json_writer::fixed(double v, int decimals) { return printed("%.*f", decimals, v); }
json_writer& json_writer::general(double v, int significant) { return printed("%.*g", significant, v); }

json_writer& json_writer::printed(const char* format, int precision, double v) {
  if (!std::isfinite(v)) return null();
  char buf[64];
  std::snprintf(buf, sizeof buf, format, precision, v);
  return raw(buf);
}

json_writer& json_writer::raw(std::string_view json) {
  separate();
  out_.append(json);
  return *this;
}

// ---- json_object -------------------------------------------------------------

json_object& json_object::add_raw(std::string_view k, std::string_view json) {
  w_.key(k).raw(json);
  return *this;
}

std::string json_object::str() const {
  json_writer closed = w_;
  closed.end_object();
  return closed.take() + "\n";
}

// ---- reading -----------------------------------------------------------------

std::optional<boost::json::value> parse_json(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) return std::nullopt;
  return v;
}

std::string serialize_json(const boost::json::value& v) { return boost::json::serialize(v); }

namespace {

const boost::json::value* member(std::string_view text, std::string_view key, std::optional<boost::json::value>& doc) {
  doc = parse_json(text);
  if (!doc || !doc->is_object()) return nullptr;
  return doc->get_object().if_contains(key);
}

}  // namespace

std::optional<std::string> string_member(std::string_view text, std::string_view key) {
  std::optional<boost::json::value> doc;
  const boost::json::value* v = member(text, key, doc);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return std::string(v->get_string());
}

std::optional<double> number_member(std::string_view text, std::string_view key) {
  std::optional<boost::json::value> doc;
  const boost::json::value* v = member(text, key, doc);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->to_number<double>();
}

std::optional<std::int64_t> int_member(const boost::json::object& o, std::string_view key, std::int64_t lo,
                                       std::int64_t hi) {
  const boost::json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  std::int64_t n = 0;
  if (v->is_int64()) {
    n = v->get_int64();
  } else if (v->is_uint64()) {
    if (v->get_uint64() > static_cast<std::uint64_t>(hi)) return std::nullopt;
    n = static_cast<std::int64_t>(v->get_uint64());
  } else if (v->is_double()) {
    const double d = v->get_double();
    if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
      return std::nullopt;
    }
    n = static_cast<std::int64_t>(d);
  } else {
    return std::nullopt;
  }
  if (n < lo || n > hi) return std::nullopt;
  return n;
}

}  // namespace hourglass::support
