// How the fleet's calls speak to the scripts and report a broker's bad
// answer: durations as whole milliseconds, and redis_unavailable with what
// was asked. Internal to fleet/ (defined in scripts.cpp).
#pragma once

#include <string>

#include "hourglass/fleet/redis.hpp"
#include "hourglass/time.hpp"

namespace hourglass::fleet::detail {

// A duration as the scripts take it in ARGV: whole milliseconds.
std::string millis(duration d);

// Throws redis_unavailable("redis: <what>: <r's error text, or "unexpected reply">").
[[noreturn]] void broker_error(const std::string& what, const redis_reply& r);

}  // namespace hourglass::fleet::detail
