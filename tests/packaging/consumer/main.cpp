// A user's first program: only the umbrella header and the exported target.
#include <hourglass/hourglass.hpp>

#include <cstdio>

int main() {
  using namespace std::chrono_literals;
  hourglass::manual_clock clock;
  hourglass::context_source request = hourglass::context_source::with_timeout(clock, 800ms);
  clock.advance(80ms);
  hourglass::context_source hop = request.get().child({.cap = 1s, .reserve = 20ms});
  const auto header = hourglass::format_grpc_timeout(hop.get().remaining());
  std::printf("forwarding Request-Timeout: %s\n", header.c_str());
  return header == "700000000n" || header == "700000u" ? 0 : 1;
}
