// What the broker did for a bench run, from INFO readings taken before and
// after it: commands (scripts' inner ones included) and CPU, per job, and
// each command's share. Internal to the fleet bench.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hourglass/fleet/redis.hpp"

namespace hourglass::bench {

// The reply, or std::runtime_error for an error reply.
fleet::redis_reply must(fleet::redis_client& c, std::vector<std::string> args);

struct broker_cost {
  // `c`: a connection to the node whose work is measured (INFO is per node).
  explicit broker_cost(fleet::redis_client& c);
  double calls_per(std::uint64_t jobs) const;
  double cpu_us_per(std::uint64_t jobs) const;
  // "evalsha 0.62/job 143.2 us/job, ...": each command's calls and Redis time a job, costliest first.
  std::string breakdown(std::uint64_t jobs) const;

  fleet::redis_client& admin;
  std::uint64_t calls0;
  double cpu0;
  std::map<std::string, std::pair<double, double>> stats0;  // per command: {calls, usec}
};

}  // namespace hourglass::bench
