// hourglass's one JSON writer, and the strict reader helpers (Boost.JSON)
// for handler inputs. Internal: shared by the daemon, the bench and tests.
//
// Why a writer of our own: Boost.JSON 1.81 prints doubles as 1.5E0 and passes
// invalid UTF-8 through; our documents carry milliseconds with 3 decimals and
// must always be valid JSON. The layout is `{"a": 1, "b": [1, 2]}`.
#pragma once

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hourglass::support {

// Appends `s` as a JSON string literal (with quotes). Invalid UTF-8 bytes
// become U+FFFD so the output is always valid JSON.
void append_json_string(std::string& out, std::string_view s);
std::string base64(std::string_view bytes);

// A streaming writer for nested documents. Values go after key() inside an
// object and on their own inside an array (or as the whole document).
class json_writer {
 public:
  json_writer& begin_object() { return open('{'); }
  json_writer& end_object() { return close('}'); }
  json_writer& begin_array() { return open('['); }
  json_writer& end_array() { return close(']'); }
  json_writer& key(std::string_view k);

  json_writer& value(std::string_view s);
  json_writer& value(const char* s) { return value(std::string_view(s)); }
  json_writer& value(const std::string& s) { return value(std::string_view(s)); }
  json_writer& value(double v) { return fixed(v, 3); }
  json_writer& value(std::int64_t v);
  json_writer& value(std::uint64_t v);
  json_writer& value(int v) { return value(static_cast<std::int64_t>(v)); }
  json_writer& value(long long v) { return value(static_cast<std::int64_t>(v)); }
  json_writer& value(unsigned v) { return value(static_cast<std::uint64_t>(v)); }
  json_writer& value(unsigned long long v) { return value(static_cast<std::uint64_t>(v)); }
  json_writer& value(bool v);
  json_writer& null();
  json_writer& fixed(double v, int decimals);           // printf %.*f; non-finite -> null
  json_writer& general(double v, int significant = 6);  // printf %.*g; non-finite -> null
  json_writer& raw(std::string_view json);              // already JSON

  // key(k) then the value.
  template <class T>
  json_writer& member(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  const std::string& str() const noexcept { return out_; }
  std::string take() noexcept { return std::move(out_); }

 private:
  json_writer& open(char bracket);
  json_writer& close(char bracket);
  json_writer& printed(const char* format, int precision, double v);  // null when not finite
  void separate();  // ", " before every value but the first of its container
  std::string out_;
  std::vector<bool> first_;  // one per open container
  bool after_key_ = false;
};

// {"a": 1, "b": "x"} built field by field; str() adds a newline.
class json_object {
 public:
  json_object() { w_.begin_object(); }
  json_object& add(std::string_view key, std::string_view value) { return put(key, value); }
  json_object& add(std::string_view key, const char* value) { return put(key, std::string_view(value)); }
  json_object& add(std::string_view key, double value) { return put(key, value); }  // 3 decimals; non-finite -> null
  json_object& add(std::string_view key, std::int64_t value) { return put(key, value); }
  json_object& add(std::string_view key, std::uint64_t value) { return put(key, value); }
  json_object& add(std::string_view key, unsigned value) { return put(key, static_cast<std::uint64_t>(value)); }
  json_object& add(std::string_view key, int value) { return put(key, static_cast<std::int64_t>(value)); }
  json_object& add(std::string_view key, bool value) { return put(key, value); }
  json_object& add_raw(std::string_view key, std::string_view json);  // already JSON
  std::string str() const;                                            // the object, followed by a newline

 private:
  template <class T>
  json_object& put(std::string_view key, const T& value) {
    w_.member(key, value);
    return *this;
  }
  json_writer w_;
};

// Parses a complete JSON document; nullopt on any syntax error.
std::optional<boost::json::value> parse_json(std::string_view text);
std::string serialize_json(const boost::json::value& v);

// A member of the JSON object in `text` (parsed with Boost.JSON); nullopt
// when `text` is not a JSON object or the member is missing or not of that
// type. For reading answers: the bench and tests.
std::optional<std::string> string_member(std::string_view text, std::string_view key);
std::optional<double> number_member(std::string_view text, std::string_view key);

// An object's integer member in [lo, hi]; nullopt if missing, not an
// integer (a float with an integral value is accepted) or out of range.
std::optional<std::int64_t> int_member(const boost::json::object& o, std::string_view key, std::int64_t lo,
                                       std::int64_t hi);

}  // namespace hourglass::support
