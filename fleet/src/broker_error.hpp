// How the fleet's calls speak to the scripts and report a broker's bad
// answer: durations as whole milliseconds (or microseconds), and redis_unavailable with what
// was asked. Internal to fleet/ (defined in scripts.cpp).
#pragma once

#include <string>

#include "hourglass/fleet/redis.hpp"
#include "hourglass/time.hpp"

namespace hourglass::fleet::detail {

// A duration as the scripts take it in ARGV: whole milliseconds, or whole
// microseconds (micros_up rounds up: a delay never comes early).
std::string millis(duration d);
std::string micros(duration d);
std::string micros_up(duration d);
// Milliseconds with three decimals, as outcomes record them.
std::string ms_text(duration d);

// Throws redis_unavailable("redis: <what>: <r's error text, or "unexpected reply">").
[[noreturn]] void broker_error(const std::string& what, const redis_reply& r);

}  // namespace hourglass::fleet::detail
