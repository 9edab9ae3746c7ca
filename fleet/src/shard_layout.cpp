#include "shard_layout.hpp"

#include <algorithm>
#include <cmath>

#include "cluster_slots.hpp"

namespace hourglass::fleet::detail {

std::vector<unsigned> even_slices(unsigned masters) {
  std::vector<unsigned> firsts;
  if (masters == 0) return firsts;
  const double per = static_cast<double>(cluster_slots) / masters;
  double cursor = 0;
  unsigned first = 0;
  for (unsigned k = 0; k < masters; ++k) {
    firsts.push_back(first);
    long last = std::lround(cursor + per - 1);
    if (last > cluster_slots - 1 || k == masters - 1) last = cluster_slots - 1;
    if (last < static_cast<long>(first)) last = first;
    first = static_cast<unsigned>(last) + 1;
    cursor += per;
  }
  return firsts;
}

namespace {

unsigned slice_of(unsigned slot, const std::vector<unsigned>& firsts) {
  return static_cast<unsigned>(std::upper_bound(firsts.begin(), firsts.end(), slot) - firsts.begin()) - 1;
}

unsigned ring_distance(unsigned a, unsigned b) {
  const unsigned d = a > b ? a - b : b - a;
  return std::min(d, cluster_slots - d);
}

}  // namespace

std::vector<std::uint16_t> spread_slots(const std::vector<std::uint16_t>& placed, unsigned shards) {
  std::vector<std::uint16_t> out;
  if (placed.empty() || shards <= placed.size()) return out;
  constexpr unsigned n_slots = cluster_slots;
  if (placed.size() == 1) {
    // An even step from shard 0, each shard kept inside the slice it steps
    // into as redis-cli slices `shards` masters: rounding would otherwise put
    // two in one slice now and then, when shard 0 sits on a slice's edge.
    const std::vector<unsigned> firsts = even_slices(shards);
    const unsigned home = slice_of(placed[0], firsts);
    for (unsigned i = 1; i < shards; ++i) {
      unsigned slot = (placed[0] + (i * n_slots + shards / 2) / shards) % n_slots;
      const unsigned want = (home + i) % shards;
      if (slice_of(slot, firsts) != want) {
        const unsigned first = firsts[want];
        const unsigned last = want + 1 < shards ? firsts[want + 1] - 1 : n_slots - 1;
        slot = ring_distance(slot, first) <= ring_distance(slot, last) ? first : last;
      }
      out.push_back(static_cast<std::uint16_t>(slot));
    }
    return out;
  }
  std::vector<unsigned> at(placed.begin(), placed.end());
  while (at.size() < shards) {
    std::vector<unsigned> sorted = at;
    std::sort(sorted.begin(), sorted.end());
    unsigned widest = 0, from = 0;
    for (std::size_t k = 0; k < sorted.size(); ++k) {
      const unsigned next = k + 1 < sorted.size() ? sorted[k + 1] : sorted[0] + n_slots;  // around the ring
      if (next - sorted[k] > widest) {
        widest = next - sorted[k];
        from = sorted[k];
      }
    }
    const unsigned slot = (from + widest / 2) % n_slots;
    at.push_back(slot);
    out.push_back(static_cast<std::uint16_t>(slot));
  }
  return out;
}

std::string tag_at_slot(std::string_view name, unsigned shard, std::uint16_t slot) {
  const std::string prefix = std::string(name) + ":" + std::to_string(shard) + ":";
  std::string best = prefix + "0";
  unsigned best_distance = cluster_slots;
  // CRC16 spreads the salts evenly: about 16,384 tries find any slot; the
  // bound keeps it total (the nearest slot found, were one ever missed).
  for (unsigned salt = 0; salt < 4'000'000; ++salt) {
    std::string tag = prefix + std::to_string(salt);
    const unsigned got = key_slot(tag);
    if (got == slot) return tag;
    const unsigned d = got > slot ? got - slot : slot - got;
    if (d < best_distance) {
      best_distance = d;
      best = std::move(tag);
    }
  }
  return best;
}

std::vector<std::string> split_tags(std::string_view record) {
  std::vector<std::string> tags;
  std::size_t at = 0;
  while (at < record.size()) {
    const std::size_t space = record.find(' ', at);
    const std::size_t end = space == std::string_view::npos ? record.size() : space;
    if (end > at) tags.emplace_back(record.substr(at, end - at));
    at = end + 1;
  }
  return tags;
}

std::string join_tags(const std::vector<std::string>& tags) {
  std::string out;
  for (const std::string& t : tags) {
    if (!out.empty()) out += ' ';
    out += t;
  }
  return out;
}

}  // namespace hourglass::fleet::detail
