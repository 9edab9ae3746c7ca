// Small JSON helpers for the daemon: a writer for flat response objects and
// a strict reader (Boost.JSON) for handler inputs. Internal to the server.
#pragma once

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hourglass::server::detail {

// Appends `s` as a JSON string literal (with quotes). Invalid UTF-8 bytes
// become U+FFFD so the output is always valid JSON.
void append_json_string(std::string& out, std::string_view s);
bool valid_utf8(std::string_view s) noexcept;
std::string base64(std::string_view bytes);

// {"a": 1, "b": "x"} built field by field.
class json_object {
 public:
  json_object& add(std::string_view key, std::string_view value);
  json_object& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  json_object& add(std::string_view key, double value);  // 3 decimals; non-finite -> null
  json_object& add(std::string_view key, std::int64_t value);
  json_object& add(std::string_view key, std::uint64_t value);
  json_object& add(std::string_view key, unsigned value) { return add(key, static_cast<std::uint64_t>(value)); }
  json_object& add(std::string_view key, int value) { return add(key, static_cast<std::int64_t>(value)); }
  json_object& add(std::string_view key, bool value);
  json_object& add_raw(std::string_view key, std::string_view json);  // already JSON
  std::string str() const;  // the object, followed by a newline

 private:
  void key(std::string_view k);
  std::string body_;
};

// Parses a complete JSON document; nullopt on any syntax error.
std::optional<boost::json::value> parse_json(std::string_view text);
std::string serialize_json(const boost::json::value& v);

// An object's integer member in [lo, hi]; nullopt if missing, not an
// integer (a float with an integral value is accepted) or out of range.
std::optional<std::int64_t> int_member(const boost::json::object& o, std::string_view key, std::int64_t lo,
                                       std::int64_t hi);

}  // namespace hourglass::server::detail
