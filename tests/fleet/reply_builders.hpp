// Redis replies built by hand, for the decoders' tests (no broker).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "hourglass/fleet/redis.hpp"

namespace hourglass::fleet::testing {

inline redis_reply nil() { return {}; }
inline redis_reply str(std::string s) {
  redis_reply r;
  r.kind = redis_reply::type::string;
  r.str = std::move(s);
  return r;
}
inline redis_reply status_reply(std::string s) {
  redis_reply r = str(std::move(s));
  r.kind = redis_reply::type::status;
  return r;
}
inline redis_reply err(std::string s) {
  redis_reply r = str(std::move(s));
  r.kind = redis_reply::type::error;
  return r;
}
inline redis_reply num(long long n) {
  redis_reply r;
  r.kind = redis_reply::type::integer;
  r.integer = n;
  return r;
}
inline redis_reply arr(std::vector<redis_reply> e) {
  redis_reply r;
  r.kind = redis_reply::type::array;
  r.elements = std::move(e);
  return r;
}

}  // namespace hourglass::fleet::testing
