// Boost.JSON is compiled into this one translation unit (header-only mode).
#include <boost/json/src.hpp>

#include "json.hpp"

#include <cmath>
#include <cstdio>

namespace hourglass::server::detail {

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0.
std::size_t utf8_len(std::string_view s, std::size_t i) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  return n;
}

}  // namespace

bool valid_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      const std::size_t n = utf8_len(s, i);
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

void json_object::key(std::string_view k) {
  body_.append(body_.empty() ? "{" : ", ");
  append_json_string(body_, k);
  body_.append(": ");
}

json_object& json_object::add(std::string_view k, std::string_view value) {
  key(k);
  append_json_string(body_, value);
  return *this;
}

json_object& json_object::add(std::string_view k, double value) {
  key(k);
  if (!std::isfinite(value)) {
    body_.append("null");
  } else {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", value);
    body_.append(buf);
  }
  return *this;
}

json_object& json_object::add(std::string_view k, std::int64_t value) {
  key(k);
  body_.append(std::to_string(value));
  return *this;
}

json_object& json_object::add(std::string_view k, std::uint64_t value) {
  key(k);
  body_.append(std::to_string(value));
  return *this;
}

json_object& json_object::add(std::string_view k, bool value) {
  key(k);
  body_.append(value ? "true" : "false");
  return *this;
}

json_object& json_object::add_raw(std::string_view k, std::string_view json) {
  key(k);
  body_.append(json);
  return *this;
}

std::string json_object::str() const { return (body_.empty() ? std::string("{") : body_) + "}\n"; }

std::optional<boost::json::value> parse_json(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) return std::nullopt;
  return v;
}

std::string serialize_json(const boost::json::value& v) { return boost::json::serialize(v); }

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

}  // namespace hourglass::server::detail
