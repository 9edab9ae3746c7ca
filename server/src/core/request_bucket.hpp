// A token bucket for requests that cost the broker more than their bytes
// suggest (a listing walked by SCAN reads up to 10,000 keys): `per_second`
// of them a second on average, `per_second` at once at most. A pure
// decision of (state, now); the caller serialises calls.
#pragma once

#include <algorithm>
#include <chrono>

#include "hourglass/time.hpp"

namespace hourglass::server::detail {

class request_bucket {
 public:
  // per_second 0: every request is refused.
  explicit request_bucket(double per_second) noexcept : rate_(std::max(per_second, 0.0)), tokens_(rate_) {}

  // Whether a request at `now` may go ahead (it takes a token).
  bool take(time_point now) noexcept {
    if (last_ != time_point{} && now > last_) {
      tokens_ = std::min(rate_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
    }
    last_ = std::max(last_, now);
    if (tokens_ < 1.0) return false;
    tokens_ -= 1.0;
    return true;
  }

 private:
  double rate_;
  double tokens_;
  time_point last_{};
};

}  // namespace hourglass::server::detail
