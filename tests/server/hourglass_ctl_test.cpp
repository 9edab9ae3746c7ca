// The hourglass command (ctl/): its text from the API's JSON, pure; then the
// command against real daemons, in memory and on a fleet: what an operator
// types, what it prints, how it exits.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "fleet_front.hpp"
#include "hourglass/ctl/ctl.hpp"
#include "hourglass/ctl/render.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;

struct ctl_run {
  int code = -1;
  std::string out, err;
};

ctl_run hourglass_cmd(std::uint16_t port, std::vector<std::string> args) {
  args.insert(args.begin(), {"hourglass", "--url", "http://127.0.0.1:" + std::to_string(port)});
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  ctl_run r;
  r.code = ctl::run(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(CtlRender, ControlCharactersFromTheDaemonCannotDriveTheTerminal) {
  EXPECT_EQ(ctl::terminal_safe("ok\x1b[2Jgone\r\x7f"), "ok\\x1b[2Jgone\\x0d\\x7f");
  EXPECT_EQ(ctl::terminal_safe("line\n\tnext", true), "line\n\tnext") << "a result's lines stay lines";
  EXPECT_EQ(ctl::terminal_safe("line\nnext"), "line\\x0anext") << "but never inside a table's cell";
  EXPECT_EQ(ctl::terminal_safe("a\xc2\x9b"
                               "31mb\xe2\x80\xae"
                               "c\xe2\x81\xa6"
                               "d\xc3\xa9"),
            "a\\u009b31mb\\u202ec\\u2066d\xc3\xa9")
      << "CSI as one code point, bidi overrides and isolates; other UTF-8 as it is";
  const auto job = json::parse(R"({"id": "j1", "handler": "h", "state": "error", "error": "e\u001b[31m",
                                   "message": "m"})");
  EXPECT_NE(ctl::jobs_text({job.as_object()}).find("e\\x1b[31m: m"), std::string::npos);
}

TEST(CtlRender, QueuesAsRowsThenTheirConsumers) {
  const auto v = json::parse(R"({"queues": [{"name": "default", "store": "fleet", "paused": true,
      "counts": {"queued": 112, "running": 20, "scheduled": 3, "waiting": 4, "dead": 1}, "oldest_queued_age_ms": 1500.0,
      "predicted_wait_ms": null, "live_slots": 0,
      "consumers": [{"name": "a:1", "slots": 10, "held": 2, "lease_left_ms": -5.0}],
      "recent": [{"window_s": 60.0, "span_s": 59.0, "per_second": {"finished": {"ok": 12.5, "error": 0.5},
                  "expired": {"queue": 0.25, "run": 0.25}, "retries": 1.0}}]}]})");
  const std::string text = ctl::queues_text(v);
  EXPECT_EQ(text,
            "QUEUE    STORE  STATE   QUEUED  RUNNING  SCHEDULED  WAITING  DEAD  OLDEST  PREDICTED WAIT  SLOTS\n"
            "default  fleet  paused  112     20       3          4        1     1.5 s   none serve it   0\n"
            "\n"
            "recent (default): 60 s: 12.5 ok/s, 0.5 errors/s, 0.5 expired/s\n"
            "\n"
            "CONSUMER (default)  SLOTS  HELD  LEASE LEFT\n"
            "a:1                 10     2     expired\n");
}

TEST(CtlRender, AJobItsAttemptsAndResultAndARefusal) {
  const auto job = json::parse(R"({"id": "j1", "handler": "flaky", "state": "ok", "queued_ms": 12.5,
      "attempts": [{"outcome": "error", "error": "boom", "message": "no", "run_ms": 2000.0}],
      "result": "a\nb"})");
  EXPECT_EQ(ctl::job_text(job.as_object()),
            "id:         j1\nhandler:    flaky\nstate:      ok\nqueued_ms:  12 ms\n"
            "\nATTEMPT  OUTCOME  STAGE  ERROR     RUN\n1        error    -      boom: no  2.0 s\n"
            "\nresult:\na\nb\n");
  const auto dead = json::parse(R"({"id": "j2", "handler": "h", "state": "dead",
      "payload": {"bytes": 9000, "content_type": "text/plain", "text": "line\nnext\u001b[2J", "truncated": true}})");
  EXPECT_EQ(ctl::job_text(dead.as_object()),
            "id:       j2\nhandler:  h\nstate:    dead\n"
            "\npayload (9000 bytes, text/plain, the first of them):\nline\nnext\\x1b[2J\n")
      << "its lines kept, its escapes made harmless";
  const auto binary = json::parse(R"({"id": "j3", "handler": "h", "state": "queued",
      "payload": {"bytes": 2, "content_type": "", "base64": "AP8="}})");
  EXPECT_EQ(ctl::job_text(binary.as_object()),
            "id:       j3\nhandler:  h\nstate:    queued\n\npayload (2 bytes, no content type, base64):\nAP8=\n");
  EXPECT_EQ(ctl::refusal_text(504, R"({"error": "deadline_exceeded", "stage": "admission", "message": "too late"})"),
            "504 deadline_exceeded (stage admission): too late");
  EXPECT_EQ(ctl::refusal_text(502, "Bad Gateway\n"), "502 Bad Gateway\\x0a");
}

TEST(CtlCommand, QueuesJobsAndAJobOfAMemoryDaemon) {
  test_server srv;
  const reply accepted = post(srv.port(), "/v1/jobs/echo", "hello", {{"Prefer", "respond-async"}});
  ASSERT_EQ(accepted.status, 202u);
  const std::string id = json_string(accepted.body, "id");
  ASSERT_TRUE(wait_until([&] { return json_string(get(srv.port(), "/v1/jobs/" + id).body, "state") == "ok"; }));

  const ctl_run queues = hourglass_cmd(srv.port(), {"queues"});
  EXPECT_EQ(queues.code, 0) << queues.err;
  EXPECT_NE(queues.out.find("default  memory"), std::string::npos) << queues.out;

  const ctl_run jobs = hourglass_cmd(srv.port(), {"jobs", "--state", "finished"});
  EXPECT_EQ(jobs.code, 0) << jobs.err;
  EXPECT_NE(jobs.out.find(id + "  echo     ok"), std::string::npos) << jobs.out;

  const ctl_run one = hourglass_cmd(srv.port(), {"job", id});
  EXPECT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("\nresult:\nhello\n"), std::string::npos) << one.out;

  const ctl_run as_json = hourglass_cmd(srv.port(), {"--json", "jobs", "--state", "ok", "--handler", "echo"});
  EXPECT_EQ(as_json.code, 0) << as_json.err;
  const auto v = json::parse(as_json.out);
  ASSERT_EQ(v.at("jobs").as_array().size(), 1u);
  EXPECT_EQ(v.at("jobs").as_array()[0].at("id").as_string(), id);
  EXPECT_TRUE(v.at("next_cursor").is_null());
}

TEST(CtlCommand, AQueueWithAReservedCharacterInItsNameIsFoundByNameAndInTheList) {
  server_options o = test_options();
  o.queue = "a+b";
  test_server srv(o);
  const ctl_run all = hourglass_cmd(srv.port(), {"queues"});
  EXPECT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.out.find("\na+b    memory"), std::string::npos) << "the list, not a queue named default: " << all.out;
  const ctl_run one = hourglass_cmd(srv.port(), {"queues", "a+b"});
  EXPECT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(get(srv.port(), "/v1/queues/a%2Bb").status, 200u) << "percent-decoded";
  EXPECT_EQ(get(srv.port(), "/v1/queues/a%2Bc").status, 404u);
}

TEST(CtlCommand, AJobsWalkFollowsTheCursorToItsLimit) {
  test_server srv;
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(post(srv.port(), "/v1/jobs/echo", "x", {{"Prefer", "respond-async"}}).status, 202u);
  ASSERT_TRUE(wait_until([&] {
    return hourglass_cmd(srv.port(), {"--json", "jobs", "--state", "ok"}).out.size() > 200;
  }));
  const auto three = json::parse(hourglass_cmd(srv.port(), {"--json", "jobs", "--limit", "3"}).out);
  EXPECT_EQ(three.at("jobs").as_array().size(), 3u);
  EXPECT_TRUE(three.at("next_cursor").is_string()) << "where it stopped";
  const auto all = json::parse(hourglass_cmd(srv.port(), {"--json", "jobs", "--all"}).out);
  EXPECT_EQ(all.at("jobs").as_array().size(), 5u);
}

TEST(CtlCommand, RefusalsUnreachableDaemonsAndTokens) {
  token_file tok("s3cret-token-2026");
  server_options o = test_options();
  o.auth_token_file = tok.path();
  test_server srv(o);
  const ctl_run no_token = hourglass_cmd(srv.port(), {"queues"});
  EXPECT_EQ(no_token.code, ctl::exit_refused);
  EXPECT_NE(no_token.err.find("401 unauthorized"), std::string::npos) << no_token.err;
  EXPECT_EQ(hourglass_cmd(srv.port(), {"--token-file", tok.path(), "queues"}).code, 0);

  const ctl_run pause = hourglass_cmd(srv.port(), {"--token-file", tok.path(), "pause"});
  EXPECT_EQ(pause.code, ctl::exit_refused);
  EXPECT_NE(pause.err.find("403 admin_disabled"), std::string::npos) << pause.err;

  const ctl_run unknown = hourglass_cmd(srv.port(), {"--token-file", tok.path(), "job", "0123"});
  EXPECT_EQ(unknown.code, ctl::exit_refused);
  EXPECT_NE(unknown.err.find("404 not_found"), std::string::npos) << unknown.err;

  const ctl_run missing_file = hourglass_cmd(srv.port(), {"--token-file", "/nonexistent/token", "queues"});
  EXPECT_EQ(missing_file.code, ctl::exit_unreachable);
  EXPECT_NE(missing_file.err.find("--token-file"), std::string::npos) << missing_file.err;

  const std::uint16_t closed = fleet::testing::free_port();
  const ctl_run down = hourglass_cmd(closed, {"queues"});
  EXPECT_EQ(down.code, ctl::exit_unreachable);
  EXPECT_NE(down.err.find("cannot reach the daemon"), std::string::npos) << down.err;

  EXPECT_NE(hourglass_cmd(srv.port(), {"purge"}).code, 0) << "a purge needs --yes";
  EXPECT_NE(hourglass_cmd(srv.port(), {"frobnicate"}).code, 0);
}

struct CtlFleet : fleet_front {
  ctl_run admin_cmd(std::vector<std::string> args) {
    args.insert(args.begin(), {"--admin-token-file", admin.path()});
    return hourglass_cmd(front.port(), std::move(args));
  }
};

TEST_F(CtlFleet, PauseResumeReplayAndPurgeFromTheTerminal) {
  const ctl_run paused = admin_cmd({"pause", "default"});
  EXPECT_EQ(paused.code, 0) << paused.err;
  EXPECT_NE(paused.out.find("default  fleet  paused"), std::string::npos) << paused.out;
  EXPECT_EQ(broker({"EXISTS", "hg:{default}:paused"}).integer, 1);
  EXPECT_NE(admin_cmd({"resume"}).out.find("default  fleet  running"), std::string::npos);
  EXPECT_EQ(broker({"EXISTS", "hg:{default}:paused"}).integer, 0);

  std::vector<std::string> dead;
  for (int i = 0; i < 2; ++i) {
    dead.push_back(submit());  // admitted while nothing waits: nobody serves the queue
    dead_letter(dead.back());
  }
  const ctl_run listed = hourglass_cmd(front.port(), {"jobs", "--state", "dead"});
  EXPECT_EQ(listed.code, 0) << listed.err;
  EXPECT_NE(listed.out.find(dead[0] + "  echo     dead   max_deliveries"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find(dead[1]), std::string::npos) << listed.out;

  EXPECT_EQ(hourglass_cmd(front.port(), {"replay", dead[0]}).code, ctl::exit_refused) << "no admin token given";
  const ctl_run replayed = admin_cmd({"replay", dead[0], "--freshness", "30s"});
  EXPECT_EQ(replayed.code, 0) << replayed.err;
  EXPECT_NE(replayed.out.find("state:     queued"), std::string::npos) << replayed.out;
  const ctl_run again = admin_cmd({"replay", dead[0]});
  EXPECT_EQ(again.code, ctl::exit_refused);
  EXPECT_NE(again.err.find("409 not_dead"), std::string::npos) << again.err;

  EXPECT_NE(admin_cmd({"replay-dead"}).code, 0) << "a bulk replay needs --yes";
  const ctl_run purged = admin_cmd({"purge", "--yes"});
  EXPECT_EQ(purged.code, 0) << purged.err;
  EXPECT_EQ(purged.out, "purged 1 dead jobs; 0 left\n");
  EXPECT_EQ(json_string(get(front.port(), "/v1/jobs/" + dead[0]).body, "state"), "queued") << "the replayed one stays";
}

}  // namespace
}  // namespace hourglass::server::testing
