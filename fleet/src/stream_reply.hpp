// Stream replies (XREADGROUP, XAUTOCLAIM) as entries. Internal to fleet/.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "hourglass/fleet/redis.hpp"

namespace hourglass::fleet {

struct stream_entry {
  std::string id;
  bool deleted = false;  // in a pending list, its data deleted from the stream
  std::vector<std::pair<std::string, std::string>> fields;
  std::string field(std::string_view name) const {
    for (const auto& [k, v] : fields) {
      if (k == name) return v;
    }
    return {};
  }
};

// XREADGROUP's reply: nil (timed out) or [[stream, [[id, [k, v, ...] | nil], ...]]].
// Throws redis_unavailable for an error or a reply of another shape.
std::vector<stream_entry> read_entries(const redis_reply& r);

// XAUTOCLAIM's reply (Redis 7): [next cursor, [[id, [k, v, ...]], ...], [deleted ids]].
struct auto_claimed {
  std::string cursor = "0-0";
  std::vector<stream_entry> entries;
  std::vector<std::string> deleted;
};
auto_claimed read_auto_claim(const redis_reply& r);

}  // namespace hourglass::fleet
