// Where a sharded queue's shards sit in a Redis Cluster's 16,384 hash slots,
// as pure functions. Shard 0 keeps the queue's own tag ({Q}: a queue that
// grows shards keeps its jobs), so its slot is CRC16's choice; every other
// shard gets a tag ("Q:i:salt") whose slot is chosen, so the shards sit an
// even step apart from shard 0 and a cluster sliced evenly into as many
// masters (or more) serves each from a different one. Random tags ({Q:i})
// put three shards on three masters of a three-master cluster about 27 % of
// the time. Internal to fleet/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hourglass::fleet::detail {

// The first slot each of `masters` masters serves when `redis-cli --cluster
// create` slices the 16,384 slots evenly among them.
std::vector<unsigned> even_slices(unsigned masters);

// The slots for shards placed.size() .. shards - 1, given the slots of the
// shards placed already (shard 0 first; at least it). A queue laid out
// anew (only shard 0 placed): shard i at placed[0] + round(i * 16384 /
// shards), an even step, moved to the edge of the slice it steps into when
// rounding put it a slot over (so on a cluster of `shards` masters, or
// more, sliced evenly, each shard has a master of its own). Shards added to a queue laid out before: each in
// the middle of the widest gap left (the shards placed earlier never move:
// their keys hold their jobs).
std::vector<std::uint16_t> spread_slots(const std::vector<std::uint16_t>& placed, unsigned shards);

// The hash tag "<name>:<shard>:<salt>" with the least salt (0, 1, ...) whose
// slot is `slot`: every slot has one within a few tens of thousands of tries.
std::string tag_at_slot(std::string_view name, unsigned shard, std::uint16_t slot);

// The record of a queue's shard tags (shard 1 on): tags separated by spaces.
std::vector<std::string> split_tags(std::string_view record);
std::string join_tags(const std::vector<std::string>& tags);

}  // namespace hourglass::fleet::detail
