// How many more stream entries the consumer's reader may hold, and how many
// of them a take may start on the broker at once: pure functions of what it
// holds now, tested without a broker or threads
// (tests/fleet/reading_room_test.cpp).
#pragma once

#include <algorithm>
#include <cstddef>

namespace hourglass::fleet::detail {

struct holding {
  std::size_t busy = 0;             // entries whose job is in our executor, and those a take in flight asks for
  std::size_t started_waiting = 0;  // of those, started by a take and not yet begun by a worker
  std::size_t takes_in_flight = 0;
  bool fenced = false;
  bool paused = false;
};

struct holding_limits {
  std::size_t slots = 1;     // jobs it runs at once (what the fleet's admission counts)
  std::size_t prefetch = 0;  // entries held beyond them, not started, for the next free worker
  std::size_t max_takes_in_flight = 1;
};

// Entries the reader may ask for now (0: it waits).
constexpr std::size_t room_to_read(const holding& h, const holding_limits& l) noexcept {
  const std::size_t most = l.slots + l.prefetch;
  if (h.fenced || h.paused || h.takes_in_flight >= l.max_takes_in_flight || h.busy >= most) return 0;
  // A job a take started (running, on the broker) still waits for a worker:
  // entries read now would reach the executor beside it, and a worker could
  // begin one of them first, so the broker would count more jobs running
  // than slots while the started one waits. Nothing more until a worker has
  // it (a moment: only a free slot is ever started).
  if (h.started_waiting > 0) return 0;
  return most - h.busy;
}

// Of those, how many a take may start at once: the free slots. The rest are
// read unstarted (prefetch) and started by the worker that takes them.
constexpr std::size_t room_to_start(const holding& h, const holding_limits& l) noexcept {
  return std::min(room_to_read(h, l), l.slots - std::min(h.busy, l.slots));
}

}  // namespace hourglass::fleet::detail
