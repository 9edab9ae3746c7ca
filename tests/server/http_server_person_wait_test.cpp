// A person's wait in memory (no --broker), on the manual clock: the
// built-in "approval" works 200 ms of a 1 s budget, then waits for the
// signal "approve" for up to 30 s holding no worker. Its machine budget
// stands still while it waits: the signal resumes it with exactly the 800 ms
// it had left; without one it ends at the wait's own limit,
// deadline_exceeded/human_wait, never charged for the wait. A signal is
// delivered once; any other is refused clearly.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

constexpr const char* approval_body = R"({"work_ms": 200, "signal": "approve", "wait_ms": 30000})";

struct HttpServerPersonWait : ::testing::Test {
  json::value job(const std::string& id) { return job_object(srv.port(), id); }
  std::string state(const std::string& id) { return job_state(srv.port(), id); }
  double number(const json::value& j, const char* key) { return j.at(key).to_number<double>(); }
  reply send_signal(const std::string& id, const std::string& name, const std::string& payload) {
    return c.post("/v1/jobs/" + id + "/signals/" + name, payload);
  }
  // An approval that has worked its 200 ms and waits for "approve".
  std::string waiting_approval() {
    const reply r = c.post("/v1/jobs/approval", approval_body, {{"Prefer", "respond-async"}, {"Job-Deadline", "1S"}});
    EXPECT_EQ(r.status, 202u) << r.body;
    const std::string id = json_string(r.body, "id");
    // "running" is set before the handler's 200 ms sleep is on the clock:
    // moving the clock before then would leave it sleeping until 400 ms.
    EXPECT_TRUE(clk.wait_for_timer_at(clk.now() + 200ms)) << job(id);
    clk.advance(200ms);
    EXPECT_TRUE(wait_until([&] { return state(id) == "waiting"; })) << job(id);
    // "waiting" is shown before the wait's 30 s limit is on the clock.
    EXPECT_TRUE(clk.wait_for_timer_at(clk.now() + 30s)) << job(id);
    return id;
  }

  manual_clock clk;
  test_server srv{test_options(), {}, clk};
  client c{srv.port()};
};

TEST_F(HttpServerPersonWait, ASignalResumesItWithTheMachineBudgetItHadLeftWhateverThePersonTook) {
  const std::string id = waiting_approval();
  EXPECT_EQ(srv.get().jobs().busy(), 0u) << "waiting for a person holds no worker";
  json::value j = job(id);
  EXPECT_EQ(j.at("waiting_for").as_string(), "signal:approve") << j;
  EXPECT_EQ(number(j, "machine_used_ms"), 200.0);
  EXPECT_EQ(number(j, "machine_left_ms"), 800.0);
  EXPECT_EQ(number(j, "human_wait_used_ms"), 0.0);
  EXPECT_EQ(number(j, "human_wait_left_ms"), 30000.0);
  const auto queue = support::parse_json(c.get("/v1/queues/default").body);
  ASSERT_TRUE(queue);
  EXPECT_EQ(queue->at("counts").at("waiting").to_number<int>(), 1) << "counted as waiting...";
  EXPECT_EQ(queue->at("counts").at("scheduled").to_number<int>(), 0) << "...not as scheduled to run";

  clk.advance(29s);  // the person takes 29 s: far past the 1 s machine budget
  j = job(id);
  EXPECT_EQ(j.at("state").as_string(), "waiting");
  EXPECT_EQ(number(j, "machine_used_ms"), 200.0) << "the machine's clock stands still";
  EXPECT_EQ(number(j, "machine_left_ms"), 800.0);
  EXPECT_EQ(number(j, "human_wait_used_ms"), 29000.0);
  EXPECT_EQ(number(j, "human_wait_left_ms"), 1000.0);

  const reply s = send_signal(id, "approve", "yes, ship it");
  ASSERT_EQ(s.status, 200u) << s.body;
  ASSERT_TRUE(wait_until([&] { return state(id) == "ok"; })) << job(id);
  const json::value done = job(id);
  const auto result = support::parse_json(std::string(done.at("result").as_string()));
  ASSERT_TRUE(result.has_value()) << done;
  EXPECT_EQ(result->at("signal").as_string(), "approve");
  EXPECT_EQ(result->at("payload").as_string(), "yes, ship it");
  EXPECT_EQ(result->at("remaining_ms").to_number<double>(), 800.0) << "its 1 s less the 200 ms it worked";
  EXPECT_EQ(done.at("woke_by").as_string(), "signal");
  EXPECT_EQ(number(done, "human_wait_used_ms"), 29000.0);
  EXPECT_EQ(number(done, "machine_used_ms"), 200.0);
  EXPECT_EQ(number(done.at("timeline").as_array().at(0), "deadline_at_ms"), 30000.0)
      << "its deadline moved on by the 29 s it waited";

  const reply again = send_signal(id, "approve", "twice");
  EXPECT_EQ(again.status, 409u) << again.body;
  EXPECT_EQ(json_string(again.body, "error"), "not_waiting") << "delivered once";
}

TEST_F(HttpServerPersonWait, WithoutASignalItEndsAtTheWaitsOwnLimitNeverChargedForTheWait) {
  const std::string id = waiting_approval();
  clk.advance(29999ms);
  EXPECT_EQ(state(id), "waiting") << "1 ms before the wait's limit";
  clk.advance(1ms);
  ASSERT_TRUE(wait_until([&] { return state(id) == "deadline_exceeded"; })) << job(id);
  const json::value j = job(id);
  EXPECT_EQ(j.at("stage").as_string(), "human_wait");
  EXPECT_EQ(number(j, "human_wait_used_ms"), 30000.0);
  EXPECT_EQ(number(j, "machine_used_ms"), 200.0) << "never charged for the wait";
  EXPECT_EQ(srv.handler("approval").expired_human_wait, 1u);
  EXPECT_EQ(
      metric_value(c.get("/metrics").body, R"(hourglass_jobs_expired_total{handler="approval",stage="human_wait"})"),
      1.0);
  EXPECT_EQ(send_signal(id, "approve", "too late").status, 409u);
}

TEST_F(HttpServerPersonWait, ASignalForNoWaitingJobIsRefusedClearlyAndChangesNothing) {
  const std::string id = waiting_approval();
  EXPECT_EQ(send_signal(std::string(32, 'a'), "approve", "").status, 404u);
  const reply wrong = send_signal(id, "reject", "");
  EXPECT_EQ(wrong.status, 409u) << wrong.body;
  EXPECT_NE(json_string(wrong.body, "message").find("signal:approve"), std::string::npos) << wrong.body;
  EXPECT_EQ(send_signal(id, "bad%20name", "").status, 400u);
  EXPECT_EQ(send_signal(id, "approve", std::string(64 * 1024 + 1, 'x')).status, 413u);
  EXPECT_EQ(c.get("/v1/jobs/" + id + "/signals/approve").status, 405u);
  EXPECT_EQ(state(id), "waiting") << "nothing changed";

  const reply sync = c.post("/v1/jobs/approval", R"({"work_ms": 0, "signal": "approve", "wait_ms": 30000})");
  EXPECT_EQ(sync.status, 500u) << sync.body;
  EXPECT_EQ(json_string(sync.body, "error"), "cannot_wait") << "a sync job's caller waits on that very run";
}

TEST_F(HttpServerPersonWait, CancellingAJobWaitingForAPersonEndsItAtOnce) {
  const std::string id = waiting_approval();
  const reply d = c.request("DELETE", "/v1/jobs/" + id);
  EXPECT_EQ(d.status, 200u) << d.body;
  EXPECT_EQ(state(id), "cancelled");
  EXPECT_EQ(send_signal(id, "approve", "").status, 409u);
  // No executor run ends a waiting job: the store counts its outcome, as the fleet's totals do.
  EXPECT_EQ(srv.handler("approval").finished_cancelled, 1u);
}

// docs/guards.md's curl example, as written, on a daemon of real time: the
// job waits for the person, the signal resumes it with its budget.
TEST(PersonWaitDocs, TheGuardsCurlExampleRunsAsWritten) {
  std::string script = doc_block("docs/guards.md", "<!-- signal-curl-example");
  ASSERT_FALSE(script.empty());
  ASSERT_EQ(run_command("command -v curl").second, 0) << "curl is not installed (tools/install-deps installs it)";
  test_server srv;
  ASSERT_EQ(replace_all(script, "localhost:8080", "127.0.0.1:" + std::to_string(srv.port())), 3) << script;
  const auto [out, rc] = run_script(script + "\necho; echo \"ID=$ID\"\n", 20);
  ASSERT_EQ(rc, 0) << out;
  const std::string id = out.substr(out.rfind("ID=") + 3, 32);
  EXPECT_EQ(json_string(out.substr(0, out.rfind("ID=")), "woke_by"), "signal") << out;
  const std::string done = wait_state(srv.port(), id, "ok");
  ASSERT_EQ(json_string(done, "state"), "ok") << done;
  const auto result = support::parse_json(json_string(done, "result"));
  ASSERT_TRUE(result.has_value()) << done;
  EXPECT_EQ(result->at("payload").as_string(), "approved by ana");
  EXPECT_LE(result->at("remaining_ms").to_number<double>(), 1900.0) << "2 s less the 100 ms it worked: " << done;
}

}  // namespace
}  // namespace hourglass::server::testing
