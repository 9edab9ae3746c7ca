// The fixture of the Lua scripts' tests: each script's text, as
// `redis-cli --eval` would send it, through EVAL on a real redis-server, on
// the keys of queue "t".
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "redis_server.hpp"
#include "scripts.hpp"

namespace hourglass::fleet::testing {

struct LuaScript : ::testing::Test {
  using enqueue_batch_reply = detail::enqueue_batch_reply;
  LuaScript() { call({"XGROUP", "CREATE", stream, group, "0", "MKSTREAM"}); }

  redis_reply call(std::vector<std::string> args) { return redis.call(context(), std::move(args)); }
  // What `redis-cli --eval fleet/lua/<name>.lua KEYS... , ARGV...` sends.
  redis_reply eval(std::string_view script, const std::vector<std::string>& keys,
                   const std::vector<std::string>& args) {
    std::vector<std::string> cmd{"EVAL", std::string(script), std::to_string(keys.size())};
    cmd.insert(cmd.end(), keys.begin(), keys.end());
    cmd.insert(cmd.end(), args.begin(), args.end());
    return call(std::move(cmd));
  }
  static std::string job(const std::string& id) { return "hg:{t}:job:" + id; }
  // A job as enqueue adds it (no idempotency key): its stream entry id.
  std::string enqueue(const std::string& id, const std::string& payload = "p") {
    const redis_reply r = eval(detail::enqueue_script,
                               {stream, slots, stats, delayed, paused, job(id), "hg:{t}:idem:", "hg:{t}:children:"},
                               {group, "60000", "0", "0", "64", "1000", id,   "echo", payload, "text/plain", "-1",
                                "0",   "",      "1", "1", "0",  "0",    "-1", "0",    "0",     "",           "full"});
    return detail::decode_enqueue(r, 1).jobs.at(0).id;
  }
  // enqueue.lua's keys and arguments for these jobs, each {id, freshness_ms, min_budget_ms, idempotency_key}.
  struct job_args {
    std::string id, freshness_ms = "-1", min_budget_ms = "0", idempotency_key, admission = "1";
    std::string max_attempts = "1", retry_base_us = "0", retry_cap_us = "0", deadline_us = "-1", delay_us = "0";
    std::string not_before_us = "0";
    std::string parent;
    std::string retry_jitter = "full";
  };
  std::string refuse_paused = "0";                      // enqueue_batch's: '1' refuses every job while `paused` exists
  std::string max_depth = "64", max_children = "1000";  // enqueue_batch's family bounds
  enqueue_batch_reply enqueue_batch(const std::vector<job_args>& jobs) {
    std::vector<std::string> keys{stream, slots, stats, delayed, paused},
        args{group, "60000", refuse_paused, "0", max_depth, max_children};
    for (const job_args& j : jobs) {
      keys.push_back(job(j.id));
      keys.push_back("hg:{t}:idem:" + j.idempotency_key);
      keys.push_back("hg:{t}:children:" + j.parent);
      for (const std::string& a :
           {j.id, std::string("echo"), std::string("body"), std::string("text/plain"), j.freshness_ms, j.min_budget_ms,
            j.idempotency_key, j.admission, j.max_attempts, j.retry_base_us, j.retry_cap_us, j.deadline_us, j.delay_us,
            j.not_before_us, j.parent, j.retry_jitter})
        args.push_back(a);
    }
    return detail::decode_enqueue(eval(detail::enqueue_script, keys, args), jobs.size());
  }
  // Delivers the next `n` entries to `consumer`.
  void deliver(const std::string& consumer, int n) {
    call({"XREADGROUP", "GROUP", group, consumer, "COUNT", std::to_string(n), "STREAMS", stream, ">"});
  }
  std::string field(const std::string& key, const std::string& name) { return call({"HGET", key, name}).str; }

  const std::string group = "hourglass";
  const std::string stream = "hg:{t}:stream", slots = "hg:{t}:slots", stats = "hg:{t}:stats";
  const std::string dead = "hg:{t}:dead", lease = "hg:{t}:lease:c1", delayed = "hg:{t}:delayed";
  const std::string paused = "hg:{t}:paused";
  redis_server server;
  io_thread io;
  redis_connection redis{io.io, server.endpoint()};
};

}  // namespace hourglass::fleet::testing
