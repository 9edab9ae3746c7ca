// A parent's wait for its children is judged by the memory store in C++
// (fan_in_satisfied, child_jobs.hpp) and by the fleet's scripts in Lua
// (wait_over, fleet/lua/lib/family.lua): held here to one table, the Lua
// through EVAL on a real redis-server.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/process.hpp"
#include "core/child_jobs.hpp"
#include "fleet/job_hash.hpp"
#include "fleet/redis_server.hpp"
#include "hourglass/fleet/redis.hpp"
#include "scripts.hpp"

namespace hourglass::server::detail {
namespace fan_in_twin {

using fleet::testing::job_hash;
namespace job_field = fleet::detail::job_field;

TEST(FanInTwin, TheScriptsWaitIsOverWhenTheMemoryStoresIs) {
  fleet::testing::redis_server server;
  test_common::io_thread io;
  fleet::redis_connection redis{io.io, server.endpoint()};
  const std::string script = std::string(fleet::detail::lib_family_lua) + "\nreturn wait_over(KEYS[1]) and 1 or 0";
  struct row {
    std::string rule;  // as the job object and the job hash spell it
    std::size_t total, done, ok;
  };
  for (const row& r : std::vector<row>{{"all", 3, 2, 2},
                                       {"all", 3, 3, 0},
                                       {"all", 0, 0, 0},  // no children: nothing to wait for
                                       {"first:2", 3, 1, 1},
                                       {"first:2", 3, 2, 0},
                                       {"first:5", 3, 3, 0},  // more than it has: all of them
                                       {"first:1", 0, 0, 0},
                                       {"first_success", 3, 1, 0},
                                       {"first_success", 3, 2, 1},
                                       {"first_success", 3, 3, 0},  // every one failed: over, unsatisfied
                                       {"first_success", 0, 0, 0}}) {
    const std::optional<fan_in> f = parse_fan_in(r.rule);
    ASSERT_TRUE(f) << r.rule;
    redis.call(context(), job_hash("hg:{t}:job:p")
                              .set(job_field::wait_rule, r.rule)
                              .set(job_field::children, std::to_string(r.total))
                              .set(job_field::children_done, std::to_string(r.done))
                              .set(job_field::children_ok, std::to_string(r.ok)));
    const bool lua = redis.call(context(), {"EVAL", script, "1", "hg:{t}:job:p"}).integer == 1;
    EXPECT_EQ(lua, fan_in_satisfied(*f, r.total, r.done, r.ok))
        << r.rule << ": " << r.done << " of " << r.total << " done, " << r.ok << " ok";
  }
  // A person's wait ('signal:<name>') is not a fan-in: its children never end it.
  redis.call(context(), job_hash("hg:{t}:job:p")
                            .set(job_field::wait_rule, "signal:approve")
                            .set(job_field::children, 1)
                            .set(job_field::children_done, 1));
  EXPECT_EQ(redis.call(context(), {"EVAL", script, "1", "hg:{t}:job:p"}).integer, 0);
}

}  // namespace fan_in_twin
}  // namespace hourglass::server::detail
