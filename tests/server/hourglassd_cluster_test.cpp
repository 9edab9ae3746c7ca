// hourglassd --broker redis+cluster://...: the fleet on a real Redis Cluster
// (three masters, three replicas on loopback). A queue's keys share one hash
// tag, so each queue lives on the master serving its slot; the daemons find
// it from any seed node and behave as on one Redis.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <csignal>
#include <string>
#include <vector>

#include "cluster_slots.hpp"
#include "fleet/redis_cluster_fixture.hpp"
#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using fleet::testing::redis_cluster_servers;

struct ClusterDaemon : ::testing::Test {
  server_options cluster_options(const std::string& consumer) {
    server_options o = test_options();
    o.broker = cluster.url();
    o.consumer = consumer;
    o.lease = 600ms;
    o.workers = 2;
    return o;
  }
  std::string wait_state(std::uint16_t port, const std::string& id, const std::string& want,
                         std::chrono::milliseconds limit = 15s) {
    std::string last;
    wait_until(
        [&] {
          last = get(port, "/v1/jobs/" + id).body;
          return json_string(last, "state") == want;
        },
        limit);
    return last;
  }
  redis_cluster_servers cluster;
};

TEST_F(ClusterDaemon, JobsGoThroughTheQueuesMasterAndEveryDaemonAnswersForThem) {
  test_server a(cluster_options("a"));
  test_server b(cluster_options("b"));
  const reply r = post(a.port(), "/v1/jobs/echo", "hello", {{"Prefer", "respond-async"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string id = json_string(r.body, "id");
  const std::string done = wait_state(b.port(), id, "ok");
  EXPECT_EQ(json_string(done, "result"), "hello") << done;
  EXPECT_EQ(get(a.port(), "/v1/jobs/" + id).body, done) << "the same record from every daemon";

  const reply bulk = post(a.port(), "/v1/jobs:bulk",
                          R"({"jobs": [{"handler": "echo", "payload": "one", "idempotency_key": "k1"},
                                       {"handler": "echo", "payload": "again", "idempotency_key": "k1"},
                                       {"handler": "echo", "payload": "two"}]})");
  ASSERT_EQ(bulk.status, 200u) << bulk.body;
  const auto doc = support::parse_json(bulk.body);
  ASSERT_TRUE(doc.has_value()) << bulk.body;
  const boost::json::array& jobs = doc->at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 3u);
  const auto id_of = [&](std::size_t i) { return std::string(jobs[i].at("body").at("id").as_string()); };
  EXPECT_EQ(id_of(1), id_of(0)) << "the idempotency key found the first job";
  EXPECT_EQ(json_string(wait_state(b.port(), id_of(0), "ok"), "result"), "one");
  EXPECT_EQ(json_string(wait_state(b.port(), id_of(2), "ok"), "result"), "two");

  // The operator's views read the queue's master (SCAN and TIME routed by the queue's slot).
  const reply list = get(a.port(), "/v1/jobs?state=ok&limit=10");
  ASSERT_EQ(list.status, 200u) << list.body;
  EXPECT_NE(list.body.find(id), std::string::npos) << list.body;
  const reply queue = get(b.port(), "/v1/queues/default");
  ASSERT_EQ(queue.status, 200u) << queue.body;
  EXPECT_NE(queue.body.find("\"consumers\""), std::string::npos) << queue.body;

  // Every key of the queue is on the one master serving its hash tag.
  fleet::testing::redis_server& owner = cluster.master_of("hg:{default}:stream");
  EXPECT_EQ(cluster.on(owner, {"EXISTS", "hg:{default}:job:" + id}).integer, 1);
  for (fleet::testing::redis_server* n : cluster.nodes()) {
    if (n == &owner) continue;
    EXPECT_EQ(cluster.on(*n, {"EXISTS", "hg:{default}:job:" + id}).integer, 0) << "on " << n->port();
  }
}

TEST_F(ClusterDaemon, AJobOfADaemonKilledWithSigkillIsFinishedByAnother) {
  const std::vector<std::string> common{"--listen", "127.0.0.1:0", "--broker", cluster.url(),     "--lease",
                                        "1s",       "--workers",   "1",        "--drain-timeout", "100ms"};
  std::vector<std::string> args_a = common;
  args_a.insert(args_a.end(), {"--consumer", "a"});
  daemon_process a(args_a);
  const std::uint16_t pa = a.wait_for_port();
  ASSERT_NE(pa, 0) << a.output();
  const reply r = post(pa, "/v1/jobs/sleep", R"({"ms": 300})", {{"Prefer", "respond-async"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string id = json_string(r.body, "id");
  wait_state(pa, id, "running");
  a.signal(SIGKILL);
  a.wait_exit(5s);
  std::vector<std::string> args_b = common;
  args_b.insert(args_b.end(), {"--consumer", "b"});
  daemon_process b(args_b);
  const std::uint16_t pb = b.wait_for_port();
  ASSERT_NE(pb, 0) << b.output();
  const std::string done = wait_state(pb, id, "ok");
  EXPECT_EQ(json_string(done, "state"), "ok") << done << b.output();
  EXPECT_EQ(json_number(done, "deliveries"), 2.0) << "started again after its worker died";
}

}  // namespace
}  // namespace hourglass::server::testing
