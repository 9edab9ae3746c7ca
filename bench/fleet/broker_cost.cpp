#include "fleet/broker_cost.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "hourglass/context.hpp"

namespace hourglass::bench {

using fleet::redis_client;
using fleet::redis_reply;

redis_reply must(redis_client& c, std::vector<std::string> args) {
  redis_reply r = c.call(context(), std::move(args));
  if (r.is_error()) throw std::runtime_error("redis: " + r.str);
  return r;
}

namespace {

// Every command Redis has run so far (INFO commandstats), scripts' inner ones included.
std::uint64_t redis_calls(redis_client& c) {
  const std::string info = must(c, {"INFO", "commandstats"}).str;
  std::uint64_t total = 0;
  for (auto pos = info.find("calls="); pos != std::string::npos; pos = info.find("calls=", pos + 6)) {
    total += std::strtoull(info.c_str() + pos + 6, nullptr, 10);
  }
  return total;
}

// Redis's CPU so far, user + system, in microseconds (INFO cpu).
double redis_cpu_us(redis_client& c) {
  const std::string info = must(c, {"INFO", "cpu"}).str;
  double total = 0;
  for (const char* k : {"used_cpu_sys:", "used_cpu_user:"}) {
    if (const auto pos = info.find(k); pos != std::string::npos)
      total += std::strtod(info.c_str() + pos + std::strlen(k), nullptr);
  }
  return total * 1e6;
}

// Per command (INFO commandstats): {calls, usec}, scripts' inner commands included.
std::map<std::string, std::pair<double, double>> command_stats(redis_client& c) {
  std::map<std::string, std::pair<double, double>> out;
  std::istringstream info(must(c, {"INFO", "commandstats"}).str);
  for (std::string line; std::getline(info, line);) {
    double calls = 0, usec = 0;
    const auto colon = line.find(':');
    if (line.rfind("cmdstat_", 0) != 0 || colon == std::string::npos) continue;
    if (std::sscanf(line.c_str() + colon + 1, "calls=%lf,usec=%lf", &calls, &usec) == 2)
      out[line.substr(8, colon - 8)] = {calls, usec};
  }
  return out;
}

// "evalsha 2.00 x 90.1 us, hset 5.00 x 1.2 us, ...": a run's commands per job,
// the costliest first (the time Redis spent inside each, not its socket work).
std::string command_breakdown(const std::map<std::string, std::pair<double, double>>& before,
                              const std::map<std::string, std::pair<double, double>>& after, std::uint64_t jobs) {
  std::vector<std::tuple<double, double, std::string>> rows;  // usec/job, calls/job, name
  for (const auto& [name, now] : after) {
    const auto it = before.find(name);
    const double calls = now.first - (it == before.end() ? 0 : it->second.first);
    const double usec = now.second - (it == before.end() ? 0 : it->second.second);
    if (calls > 0) rows.emplace_back(usec / static_cast<double>(jobs), calls / static_cast<double>(jobs), name);
  }
  std::sort(rows.rbegin(), rows.rend());
  std::string out;
  for (const auto& [usec, calls, name] : rows) {
    char item[96];
    std::snprintf(item, sizeof item, "%s%s %.2f/job %.1f us/job", out.empty() ? "" : ", ", name.c_str(), calls, usec);
    out += item;
  }
  return out;
}

}  // namespace

broker_cost::broker_cost(redis_client& c)
    : admin(c), calls0(redis_calls(c)), cpu0(redis_cpu_us(c)), stats0(command_stats(c)) {}

double broker_cost::calls_per(std::uint64_t jobs) const {
  return static_cast<double>(redis_calls(admin) - calls0) / static_cast<double>(jobs);
}

double broker_cost::cpu_us_per(std::uint64_t jobs) const {
  return (redis_cpu_us(admin) - cpu0) / static_cast<double>(jobs);
}

std::string broker_cost::breakdown(std::uint64_t jobs) const {
  return command_breakdown(stats0, command_stats(admin), jobs);
}

}  // namespace hourglass::bench
