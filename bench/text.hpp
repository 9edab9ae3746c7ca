// Numbers as the bench's reports print them.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>

namespace hourglass::bench {

// `v` with `decimals` digits after the point; "-" for a value not measured
// (NaN, infinite).
inline std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  return fmt::format("{:.{}f}", v, decimals);
}

}  // namespace hourglass::bench
