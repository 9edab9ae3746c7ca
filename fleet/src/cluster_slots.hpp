// The decisions of a Redis Cluster client, as pure functions: which of the
// 16,384 hash slots a key falls in, which key of a command routes it, what a
// MOVED or ASK redirect says, and who serves each slot according to CLUSTER
// SLOTS. Internal to fleet/; redis_cluster.cpp moves the bytes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/fleet/redis.hpp"

namespace hourglass::fleet::detail {

inline constexpr std::uint16_t cluster_slots = 16384;

// CRC16 (XMODEM) of the key, or of its hash tag: the part between the first
// '{' and the next '}' when that part is not empty (as Redis computes it).
std::uint16_t key_slot(std::string_view key) noexcept;

// The key that decides where `args` runs: EVAL/EVALSHA's first key, the first
// stream after XREAD(GROUP)'s STREAMS, XGROUP/XINFO's key, else the first
// argument. nullopt: the command names no key (TIME, SCRIPT, PING, SCAN, an
// EVAL with no keys): the caller routes it.
std::optional<std::string_view> command_key(const std::vector<std::string>& args) noexcept;

struct redirect {
  enum class kind { moved, ask };
  kind how = kind::moved;
  std::uint16_t slot = 0;
  std::string host;  // empty: the node that answered (Redis writes an unknown endpoint as "")
  std::uint16_t port = 0;
};
// "MOVED 3999 127.0.0.1:6381", "ASK 3999 [::1]:6381" or "ASK 3999 ::1:6381".
// nullopt: any other error.
std::optional<redirect> parse_redirect(std::string_view error) noexcept;

// An error reply that says: the cluster cannot serve this now (CLUSTERDOWN,
// TRYAGAIN during a slot migration).
bool is_cluster_down(std::string_view error) noexcept;
bool is_try_again(std::string_view error) noexcept;

struct cluster_node {
  std::string host;
  std::uint16_t port = 0;
  bool operator==(const cluster_node&) const = default;
  std::string address() const;  // "host:port", "[v6]:port"
};

// Who serves each slot: the master CLUSTER SLOTS names for it.
class slot_map {
 public:
  slot_map() noexcept { owner_.fill(none); }  // no slot served
  // From a CLUSTER SLOTS reply: [[start, end, [host, port, id, ...], replica...], ...].
  // A master whose host is "" or "?" is `asked` (the node that answered).
  // Throws redis_unavailable on a reply of another shape.
  static slot_map from_cluster_slots(const redis_reply& reply, const cluster_node& asked);

  // The slot's master, or nullptr when no master serves it (a failover under way).
  const cluster_node* owner(std::uint16_t slot) const noexcept;
  // Every master, each once.
  const std::vector<cluster_node>& masters() const noexcept { return nodes_; }
  // Records a MOVED: the slot's master is `node` now.
  void move(std::uint16_t slot, const cluster_node& node);

 private:
  static constexpr std::uint16_t none = 0xffff;
  std::uint16_t index_of(const cluster_node& node);
  std::vector<cluster_node> nodes_;
  std::array<std::uint16_t, cluster_slots> owner_;  // index into nodes_, or none
};

}  // namespace hourglass::fleet::detail
