// A produce-only daemon on a real Redis, with the admin token: it runs
// nothing, so jobs stay where a test puts them; and the broker at hand to
// put them there (the admin API's tests: the dead letter, the hourglass
// command).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fleet/job_hash.hpp"
#include "fleet/redis_server.hpp"
#include "hourglass/fleet/redis.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {

using fleet::testing::job_hash;
namespace job_field = fleet::detail::job_field;
using jobs::job_state;

struct fleet_front : ::testing::Test {
  server_options front_options() {
    server_options o = test_options();
    o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
    o.consumer = "front";
    o.produce_only = true;
    o.admin_token_file = admin.path();
    return o;
  }
  fleet::redis_reply broker(std::vector<std::string> cmd) {
    fleet::testing::io_thread io;
    fleet::redis_connection c(io.io, redis.endpoint());
    return c.call(context(), std::move(cmd));
  }
  std::string submit() {
    const reply r = post(front.port(), "/v1/jobs/echo", "keep me", {{"Prefer", "respond-async"}});
    EXPECT_EQ(r.status, 202u) << r.body;
    return json_string(r.body, "id");
  }
  // What start.lua does to a job whose workers died max_deliveries times.
  void dead_letter(const std::string& id) {
    const std::string key = "hg:{default}:job:" + id;
    const std::string entry = broker({"HGET", key, "entry"}).str;
    broker({"XACK", "hg:{default}:stream", "hourglass", entry});
    broker({"XDEL", "hg:{default}:stream", entry});
    const std::string dead_entry = broker({"XADD", "hg:{default}:dead", "*", "id", id, "deliveries", "3"}).str;
    broker(job_hash(key)
               .state(job_state::dead)
               .set(job_field::cause, "max_deliveries")
               .set(job_field::dead_entry, dead_entry));
    broker({"PEXPIRE", key, "600000"});
  }
  reply admin_call(const std::string& method, const std::string& target) {
    return client(front.port()).request(method, target, "", {{"Authorization", "Bearer adm1n-token-0123"}});
  }

  fleet::testing::redis_server redis;
  token_file admin{"adm1n-token-0123"};
  test_server front{front_options()};
};

}  // namespace hourglass::server::testing
