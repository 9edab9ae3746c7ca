// Rules the broker's scripts and the daemon both apply, written once in each
// language (fleet/lua/lib/*.lua, spliced into the scripts; the C++ in jobs/
// and fleet/), held here to one table: each lib's function runs through
// EVAL on a real redis-server beside its C++ twin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/process.hpp"
#include "hourglass/admission_policy.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/jobs/job_state.hpp"
#include "redis_server.hpp"
#include "scripts.hpp"

namespace hourglass::fleet::lua_twins_testing {
namespace {

using namespace std::chrono_literals;

struct LuaTwins : ::testing::Test {
  // `lib`'s text, then `tail` (which may read and set the lib's locals).
  redis_reply run(std::string_view lib, const std::string& tail, std::vector<std::string> argv = {}) {
    std::vector<std::string> cmd{"EVAL", std::string(lib) + "\n" + tail, "0"};
    for (std::string& a : argv) cmd.push_back(std::move(a));
    return redis.call(context(), std::move(cmd));
  }
  testing::redis_server server;
  test_common::io_thread io;
  redis_connection redis{io.io, server.endpoint()};
};

TEST_F(LuaTwins, TheUnfinishedStatesAreTheDaemons) {
  const std::string tail = "return unfinished(ARGV[1]) and 1 or 0";
  for (const jobs::job_state s : jobs::all_job_states) {
    EXPECT_EQ(run(detail::lib_states_lua, tail, {std::string(jobs::to_string(s))}).integer == 1, !jobs::is_final(s))
        << jobs::to_string(s);
  }
  for (const char* not_a_state : {"", "finished", "Queued"})
    EXPECT_EQ(run(detail::lib_states_lua, tail, {not_a_state}).integer, 0) << not_a_state;
}

TEST_F(LuaTwins, TheStatesAreTheDaemonsAndNoOther) {
  std::string names;  // every name of the scripts' table, in a stable order
  for (const redis_reply& n : run(detail::lib_states_lua,
                                  "local t = {} for k in pairs(states) do t[#t + 1] = k end "
                                  "table.sort(t) return t")
                                  .elements)
    names += n.str + " ";
  std::vector<std::string> want;
  for (const jobs::job_state s : jobs::all_job_states) want.emplace_back(jobs::to_string(s));
  std::sort(want.begin(), want.end());
  std::string want_names;
  for (const std::string& n : want) want_names += n + " ";
  EXPECT_EQ(names, want_names);
  for (const jobs::job_state s : jobs::all_job_states) {
    const std::string name(jobs::to_string(s));
    EXPECT_EQ(run(detail::lib_states_lua, "return states." + name).str, name);
  }
  // A misspelt state is the broker's error, not a new state written.
  const redis_reply misspelt = run(detail::lib_states_lua, "return states.queud");
  EXPECT_TRUE(misspelt.is_error());
  EXPECT_NE(misspelt.str.find("no job state queud"), std::string::npos) << misspelt.str;
}

TEST_F(LuaTwins, ThePredictedWaitIsTheDaemons) {
  struct row {
    std::size_t backlog, mean_us, live_slots;
  };
  for (const row& r : std::vector<row>{{0, 5000, 0},
                                       {0, 5000, 4},
                                       {1, 5000, 0},
                                       {100, 20000, 4},
                                       {3, 10000, 2},
                                       {7, 333, 3},
                                       {1, 0, 1},
                                       {1'000'000, 1'000'000, 1}}) {
    const std::string tail = "fleet_counts = {" + std::to_string(r.backlog) + ", " + std::to_string(r.mean_us) + ", " +
                             std::to_string(r.live_slots) + ", 0}\nreturn fleet_predicted_wait_us()";
    const long long lua_us = run(detail::lib_fleet_wait_lua, tail).integer;
    const duration cpp = predicted_wait({r.backlog, r.live_slots, std::chrono::microseconds(r.mean_us)});
    const long long cpp_us = cpp == duration::max()
                                 ? -1
                                 : std::chrono::duration_cast<std::chrono::microseconds>(cpp).count();
    EXPECT_EQ(lua_us, cpp_us) << r.backlog << " x " << r.mean_us << " us / " << r.live_slots;
  }
}

TEST_F(LuaTwins, AdmissionIsTheDaemons) {
  struct row {
    long long left_us, wait_us, need_us;  // wait -1: unbounded
  };
  for (const row& r : std::vector<row>{{1000, 0, 0},
                                       {1000, 999, 0},
                                       {1000, 1000, 0},   // nothing left: not even the 1 us every job needs
                                       {1000, 500, 500},  // exactly its minimum budget left: admitted
                                       {1000, 501, 500},
                                       {1000, -1, 0},
                                       {0, 0, 0},
                                       {-5000, 0, 0},  // a deadline already past
                                       {60'000'000, 59'000'000, 1'000'000}}) {
    const bool lua = run(detail::lib_admission_lua,
                         "return admits(tonumber(ARGV[1]), tonumber(ARGV[2]), "
                         "tonumber(ARGV[3])) and 1 or 0",
                         {std::to_string(r.left_us), std::to_string(r.wait_us), std::to_string(r.need_us)})
                         .integer == 1;
    const duration wait = r.wait_us < 0 ? duration::max() : duration(std::chrono::microseconds(r.wait_us));
    const time_point now = time_point{} + 1h;
    const job_bounds fresh{.start_by = now + std::chrono::microseconds(r.left_us),
                           .min_budget = std::chrono::microseconds(r.need_us)};
    const bool cpp = starts_in_time(fresh, now, wait);
    EXPECT_EQ(lua, cpp) << r.left_us << " left, " << r.wait_us << " wait, " << r.need_us << " need";
  }
}

}  // namespace
}  // namespace hourglass::fleet::lua_twins_testing
