#include "cluster_slots.hpp"

#include <algorithm>
#include <charconv>
#include <strings.h>

namespace hourglass::fleet::detail {

namespace {

// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis's crc16.c.
constexpr std::array<std::uint16_t, 256> crc16_table = [] {
  std::array<std::uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    auto c = static_cast<std::uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b) c = static_cast<std::uint16_t>((c & 0x8000) != 0 ? (c << 1) ^ 0x1021 : c << 1);
    t[i] = c;
  }
  return t;
}();

std::uint16_t crc16(std::string_view s) noexcept {
  std::uint16_t crc = 0;
  for (const char ch : s) {
    const auto byte = static_cast<unsigned char>(ch);
    crc = static_cast<std::uint16_t>((crc << 8) ^ crc16_table[((crc >> 8) ^ byte) & 0xff]);
  }
  return crc;
}

bool equals_nocase(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

template <typename T>
std::optional<T> number(std::string_view s) noexcept {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

bool starts_with_word(std::string_view error, std::string_view word) noexcept {
  return error.substr(0, word.size()) == word && (error.size() == word.size() || error[word.size()] == ' ');
}

}  // namespace

std::uint16_t key_slot(std::string_view key) noexcept {
  const auto open = key.find('{');
  if (open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close != open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) & (cluster_slots - 1);
}

std::optional<std::string_view> command_key(const std::vector<std::string>& args) noexcept {
  if (args.empty()) return std::nullopt;
  const std::string_view name = args[0];
  for (const std::string_view keyless : {"TIME", "SCRIPT", "PING", "SCAN", "CLUSTER", "INFO", "ASKING", "READONLY",
                                         "FUNCTION", "CONFIG", "FLUSHALL", "FLUSHDB", "DBSIZE", "WAIT", "AUTH"}) {
    if (equals_nocase(name, keyless)) return std::nullopt;
  }
  for (const std::string_view eval : {"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"}) {
    if (!equals_nocase(name, eval)) continue;
    if (args.size() < 4) return std::nullopt;
    const auto keys = number<long>(args[2]);
    if (!keys || *keys < 1) return std::nullopt;
    return std::string_view(args[3]);
  }
  if (equals_nocase(name, "XREADGROUP") || equals_nocase(name, "XREAD")) {
    for (std::size_t i = 1; i + 1 < args.size(); ++i) {
      if (equals_nocase(args[i], "STREAMS")) return std::string_view(args[i + 1]);
    }
    return std::nullopt;
  }
  if (equals_nocase(name, "XGROUP") || equals_nocase(name, "XINFO")) {
    if (args.size() < 3) return std::nullopt;
    return std::string_view(args[2]);
  }
  if (args.size() < 2) return std::nullopt;
  return std::string_view(args[1]);
}

std::optional<redirect> parse_redirect(std::string_view error) noexcept {
  redirect r;
  std::string_view word;
  if (starts_with_word(error, "MOVED")) {
    r.how = redirect::kind::moved;
    word = "MOVED";
  } else if (starts_with_word(error, "ASK")) {
    r.how = redirect::kind::ask;
    word = "ASK";
  } else {
    return std::nullopt;
  }
  if (error.size() <= word.size() + 1) return std::nullopt;  // the word alone
  error.remove_prefix(word.size() + 1);
  const auto space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto slot = number<std::uint16_t>(error.substr(0, space));
  if (!slot || *slot >= cluster_slots) return std::nullopt;
  r.slot = *slot;
  std::string_view where = error.substr(space + 1);
  const auto colon = where.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto port = number<std::uint16_t>(where.substr(colon + 1));
  if (!port || *port == 0) return std::nullopt;
  r.port = *port;
  std::string_view host = where.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  r.host = std::string(host);
  return r;
}

bool is_cluster_down(std::string_view error) noexcept { return starts_with_word(error, "CLUSTERDOWN"); }
bool is_try_again(std::string_view error) noexcept { return starts_with_word(error, "TRYAGAIN"); }

std::string cluster_node::address() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

slot_map slot_map::from_cluster_slots(const redis_reply& reply, const cluster_node& asked) {
  const auto bad = [](const std::string& why) { return redis_unavailable("redis cluster: CLUSTER SLOTS: " + why); };
  if (!reply.is_array()) throw bad(reply.is_error() ? reply.str : "not an array");
  slot_map m;
  for (const redis_reply& range : reply.elements) {
    if (!range.is_array() || range.elements.size() < 3 || !range.elements[0].is_integer() ||
        !range.elements[1].is_integer()) {
      throw bad("a range that is not [start, end, master, ...]");
    }
    const long long start = range.elements[0].integer;
    const long long end = range.elements[1].integer;
    if (start < 0 || end < start || end >= cluster_slots) throw bad("slots out of range");
    const redis_reply& master = range.elements[2];
    if (!master.is_array() || master.elements.size() < 2 || !master.elements[0].is_string() ||
        !master.elements[1].is_integer() || master.elements[1].integer <= 0 || master.elements[1].integer > 65535) {
      throw bad("a master that is not [host, port, ...]");
    }
    cluster_node node{master.elements[0].str, static_cast<std::uint16_t>(master.elements[1].integer)};
    if (node.host.empty() || node.host == "?") node.host = asked.host;
    const std::uint16_t index = m.index_of(node);
    std::fill(m.owner_.begin() + start, m.owner_.begin() + end + 1, index);
  }
  return m;
}

const cluster_node* slot_map::owner(std::uint16_t slot) const noexcept {
  if (slot >= cluster_slots || owner_[slot] == none) return nullptr;
  return &nodes_[owner_[slot]];
}

void slot_map::move(std::uint16_t slot, const cluster_node& node) {
  if (slot < cluster_slots) owner_[slot] = index_of(node);
}

std::uint16_t slot_map::index_of(const cluster_node& node) {
  const auto it = std::find(nodes_.begin(), nodes_.end(), node);
  if (it != nodes_.end()) return static_cast<std::uint16_t>(it - nodes_.begin());
  nodes_.push_back(node);
  return static_cast<std::uint16_t>(nodes_.size() - 1);
}

}  // namespace hourglass::fleet::detail
