// Polls `pred` until it holds or `limit` of real time has passed. For tests
// whose other side runs on real time (sockets, a real redis-server, threads):
// it waits for an event, never for a deadline.
#pragma once

#include <chrono>
#include <thread>

namespace hourglass::test_common {

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace hourglass::test_common
