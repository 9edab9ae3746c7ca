// The broker's scripts and the daemon name a job's states apart (Lua and
// C++): fleet/lua/lib/states.lua's unfinished() is held here to
// hourglass/jobs/job_state.hpp, state by state, on a real redis-server.
#include <gtest/gtest.h>

#include <string>

#include "common/process.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/jobs/job_state.hpp"
#include "redis_server.hpp"
#include "scripts.hpp"

namespace hourglass::fleet::job_states_testing {
namespace {

TEST(JobStates, TheScriptsUnfinishedStatesAreTheDaemons) {
  testing::redis_server server;
  test_common::io_thread io;
  redis_connection redis{io.io, server.endpoint()};
  const std::string script = std::string(detail::lib_states_lua) + "\nreturn unfinished(ARGV[1]) and 1 or 0\n";
  for (const jobs::job_state s : jobs::all_job_states) {
    const redis_reply r = redis.call(context(), {"EVAL", script, "0", std::string(jobs::to_string(s))});
    EXPECT_EQ(r.integer == 1, !jobs::is_final(s)) << jobs::to_string(s);
  }
  for (const char* not_a_state : {"", "finished", "Queued"}) {
    EXPECT_EQ(redis.call(context(), {"EVAL", script, "0", not_a_state}).integer, 0) << not_a_state;
  }
}

}  // namespace
}  // namespace hourglass::fleet::job_states_testing
