// Fan-in in memory (no --broker): a parent that returns
// handler_result::wait_for frees its worker while its children run, and is
// called again with their outcomes when its rule is met (all, the first n,
// the first success) or when its deadline less its keep comes first, with
// what has finished; children still unfinished then are cancelled (cause
// parent). Time is the manual clock's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "fan_in_family.hpp"
#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

struct HttpServerFanIn : ::testing::Test {
  server_options four_workers() {
    server_options o = test_options();
    o.workers = 4;
    return o;
  }
  json::value job(const std::string& id) { return job_object(srv.port(), id); }
  std::string state(const std::string& id) { return job_state(srv.port(), id); }
  std::string ended(std::size_t child) { return state(g.sent().at(child)); }
  // A parent with a 10 s deadline, waiting with its three children running.
  std::string start_waiting_parent() {
    const reply r = c.post("/v1/jobs/gather", "p", {{"Prefer", "respond-async"}, {"Job-Deadline", "10S"}});
    EXPECT_EQ(r.status, 202u) << r.body;
    const std::string id = json_string(r.body, "id");
    EXPECT_TRUE(wait_until([&] { return g.working.load() == 3 && state(id) == "waiting"; })) << job(id);
    // "waiting" is shown before its wake (its deadline less the 100 ms it keeps) is on the clock.
    EXPECT_TRUE(clk.wait_for_timer_at(clk.now() + 9900ms)) << job(id);
    return id;
  }

  manual_clock clk;
  gatherers g;
  test_server srv{four_workers(), [this](http_server& s) { g.setup(s); }, clk};
  client c{srv.port()};
};

TEST_F(HttpServerFanIn, AParentWaitingOnThreeChildrenHoldsNoWorkerAndResumesWhenTheyAllFinish) {
  const std::string parent = start_waiting_parent();
  EXPECT_EQ(srv.get().jobs().busy(), 3u) << "the children's workers only: the parent holds none";
  const json::value waiting = job(parent);
  EXPECT_EQ(waiting.at("waiting_for").as_string(), "all") << waiting;
  EXPECT_EQ(waiting.at("wake_in_ms").to_number<double>(), 9900.0) << "its deadline less its 100 ms minimum";
  EXPECT_EQ(waiting.at("children").as_array().size(), 3u);

  g.release[0] = true;
  g.release[1] = true;
  ASSERT_TRUE(wait_until([&] { return g.working.load() == 1; }));
  EXPECT_EQ(state(parent), "waiting") << "two of three: not yet";
  g.release[2] = true;
  ASSERT_TRUE(wait_until([&] { return state(parent) == "ok"; })) << job(parent);
  const json::value done = job(parent);
  EXPECT_EQ(done.at("result").as_string(), "children ok=r0 ok=r1 ok=r2");
  EXPECT_EQ(done.at("wakes").to_number<int>(), 1);
  EXPECT_EQ(done.at("woke_by").as_string(), "children");
  EXPECT_EQ(g.runs.load(), 2) << "called once to send, once to gather";
  const handler_metrics& m = srv.get().jobs().stats().handler("gather");
  EXPECT_EQ(m.admitted.value(), 2u) << "each run is admitted";
  EXPECT_EQ(m.admitted_answered.value(), 1u) << "the resumed run came after the caller's 202";
  const handler_metrics& kids = srv.get().jobs().stats().handler("work");
  EXPECT_EQ(kids.admitted.value(), 3u);
  EXPECT_EQ(kids.admitted_answered.value(), 0u) << "a child has no answer of its own: its parent's run asked";
}

// Child 2 never finishes: at the parent's deadline less its keep the wait
// ends with the two results it has, and child 2 is stopped, not left to
// work for nobody until its own deadline.
TEST_F(HttpServerFanIn, WhenAChildIsTooSlowTheDeadlineEndsTheWaitWithThePartialResults) {
  const std::string parent = start_waiting_parent();
  g.release[0] = true;
  g.release[1] = true;
  ASSERT_TRUE(wait_until([&] { return g.working.load() == 1; }));
  // A child's handler has returned before its worker records its outcome.
  ASSERT_TRUE(wait_until([&] { return ended(0) == "ok" && ended(1) == "ok"; }));
  clk.advance(9899ms);
  EXPECT_EQ(state(parent), "waiting") << "1 ms before its wake time";
  clk.advance(1ms);
  ASSERT_TRUE(wait_until([&] { return state(parent) == "ok"; })) << job(parent);
  // The slow child is cancelled at the wake: still stopping, or stopped, when the resumed run reads it.
  EXPECT_THAT(std::string(job(parent).at("result").as_string()),
              ::testing::AnyOf("deadline ok=r0 ok=r1 running", "deadline ok=r0 ok=r1 cancelled"));
  const std::string slow = g.sent().at(2);
  ASSERT_TRUE(wait_until([&] { return state(slow) == "cancelled"; })) << job(slow);
  EXPECT_EQ(job(slow).at("cause").as_string(), "parent");
}

TEST_F(HttpServerFanIn, FirstSuccessResumesOnTheFirstChildThatSucceedsNotTheFirstThatEnds) {
  g.rule = fan_in::first_success();
  const std::string parent = start_waiting_parent();
  EXPECT_EQ(job(parent).at("waiting_for").as_string(), "first_success");
  g.fail[0] = true;
  g.release[0] = true;
  ASSERT_TRUE(wait_until([&] { return ended(0) == "error"; })) << "ended, not only out of its handler";
  EXPECT_EQ(state(parent), "waiting") << "a failure is not a success";
  g.release[1] = true;
  ASSERT_TRUE(wait_until([&] { return state(parent) == "ok"; })) << job(parent);
  EXPECT_THAT(std::string(job(parent).at("result").as_string()),
              ::testing::AnyOf("children error ok=r1 running", "children error ok=r1 cancelled"));
  const std::string rest = g.sent().at(2);
  ASSERT_TRUE(wait_until([&] { return state(rest) == "cancelled"; })) << job(rest);
}

TEST_F(HttpServerFanIn, FirstNResumesOnceNChildrenHaveEndedWhateverTheirOutcomes) {
  g.rule = fan_in::first(2);
  const std::string parent = start_waiting_parent();
  EXPECT_EQ(job(parent).at("waiting_for").as_string(), "first:2");
  g.fail[2] = true;
  g.release[2] = true;
  ASSERT_TRUE(wait_until([&] { return ended(2) == "error"; }));
  EXPECT_EQ(state(parent), "waiting");
  g.release[0] = true;
  ASSERT_TRUE(wait_until([&] { return state(parent) == "ok"; })) << job(parent);
  EXPECT_THAT(std::string(job(parent).at("result").as_string()),
              ::testing::AnyOf("children ok=r0 running error", "children ok=r0 cancelled error"));
}

TEST_F(HttpServerFanIn, CancellingAWaitingParentEndsItAndItsChildrenAndNothingResumesIt) {
  const std::string parent = start_waiting_parent();
  const reply d = c.request("DELETE", "/v1/jobs/" + parent);
  EXPECT_EQ(d.status, 200u) << d.body;
  EXPECT_EQ(state(parent), "cancelled") << "waiting: nothing runs, so it ends at once";
  for (const std::string& id : g.sent()) EXPECT_TRUE(wait_until([&] { return state(id) == "cancelled"; })) << id;
  clk.advance(10s);
  EXPECT_EQ(state(parent), "cancelled");
  EXPECT_EQ(g.runs.load(), 1) << "never resumed";
  EXPECT_EQ(srv.handler("gather").finished_cancelled, 1u) << "a waiting parent's end is counted, once";
}

TEST_F(HttpServerFanIn, ASyncJobCannotWaitItIsAnError) {
  const reply r = c.post("/v1/jobs/sync_wait", "x");
  EXPECT_EQ(r.status, 500u) << r.body;
  EXPECT_EQ(json_string(r.body, "error"), "cannot_wait");
}

// docs/guards.md's curl example, as written, on a daemon of real time: the
// built-in fanout waits for the first two of three sleeps; the third, still
// sleeping, is stopped because nobody waits for it.
// A fanout keeps its children's results only while they fit its own
// (--max-result): past that each is left out with its size, so fanouts of
// fanouts do not grow a level at a time.
// One worker: the parent ran on it, then a child took it and holds it;
// the others queue behind. At the wait's end by its deadline the children
// are cancelled at once, so the resumed run gets the worker now, not once
// the child has run on to its own deadline. The resumed run wakes with just
// its keep left, behind a worker whose jobs have cost seconds: it is
// admitted work continuing, not judged again by the predicted wait (5 s
// here), as the fleet puts it straight back on its stream.
TEST(HttpServerFanInOneWorker, TheWaitsEndCancelsTheChildrenAtOnceSoTheResumedRunGetsTheWorker) {
  manual_clock clk;
  gatherers g;
  std::atomic<bool> slow_started{false}, slow_release{false};
  server_options o = test_options();
  o.workers = 1;
  test_server srv(
      o,
      [&](http_server& s) {
        g.setup(s);
        s.add_handler("slow", [&](const context&, const request_view&) {
          slow_started = true;
          while (!slow_release.load()) std::this_thread::sleep_for(1ms);
          return handler_result{"slow", "text/plain"};
        });
      },
      clk);
  // The worker's observed cost per job: 2 s of the daemon's clock (its
  // children, queued behind one another, are still admitted: 5 s < 10 s).
  const reply warm = post(srv.port(), "/v1/jobs/slow", "", {{"Prefer", "respond-async"}, {"Job-Deadline", "1M"}});
  ASSERT_EQ(warm.status, 202u) << warm.body;
  ASSERT_TRUE(wait_until([&] { return slow_started.load(); }));
  clk.advance(2s);
  slow_release = true;
  ASSERT_TRUE(wait_until([&] { return job_state(srv.port(), json_string(warm.body, "id")) == "ok"; }));
  ASSERT_GE(srv.get().jobs().queue().mean_service(), 1500ms);
  const reply r = post(srv.port(), "/v1/jobs/gather", "p", {{"Prefer", "respond-async"}, {"Job-Deadline", "10S"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string parent = json_string(r.body, "id");
  ASSERT_TRUE(wait_until([&] { return g.working.load() == 1 && job_state(srv.port(), parent) == "waiting"; }));
  ASSERT_TRUE(clk.wait_for_timer_at(clk.now() + 9900ms));
  clk.advance(9900ms);  // its wake time; the children's own deadlines are 95 ms later
  ASSERT_TRUE(wait_until([&] { return job_state(srv.port(), parent) == "ok"; }))
      << "the resumed run waited for the worker: " << job_object(srv.port(), parent);
  for (const std::string& child : g.sent()) {
    ASSERT_TRUE(wait_until([&] { return job_state(srv.port(), child) == "cancelled"; }))
        << job_object(srv.port(), child);
    EXPECT_EQ(json_string(get(srv.port(), "/v1/jobs/" + child).body, "cause"), "parent");
  }
  EXPECT_EQ(srv.handler("work").finished_cancelled, 3u) << "each child's end counted once, queued or running";
}

TEST(HttpServerFanInBound, AFanoutCollectsResultsWithinMaxResult) {
  server_options o = test_options();
  o.max_result = 4096;
  test_server srv(o);
  const std::string two_kib(2048, 'k');
  const reply r = post(
      srv.port(), "/v1/jobs/fanout",
      R"({"handler": "echo", "bodies": [")" + two_kib + R"(", ")" + two_kib + R"(", ")" + two_kib + R"("]})",
      {{"Prefer", "respond-async"}, {"Job-Deadline", "10S"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string body = wait_state(srv.port(), json_string(r.body, "id"), "ok");
  const auto doc = support::parse_json(body);
  ASSERT_TRUE(doc) << body;
  const auto result = support::parse_json(std::string(doc->at("result").as_string()));
  ASSERT_TRUE(result);
  const json::array& children = result->at("children").as_array();
  ASSERT_EQ(children.size(), 3u);
  EXPECT_EQ(children[0].at("result").as_string(), two_kib);
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_FALSE(children[i].as_object().contains("result")) << children[i];
    EXPECT_EQ(children[i].at("result_omitted_bytes").to_number<int>(), 2048) << children[i];
  }
}

TEST(FanInDocs, TheGuardsCurlExampleRunsAsWritten) {
  std::string script = doc_block("docs/guards.md", "<!-- fan-in-curl-example");
  ASSERT_FALSE(script.empty());
  ASSERT_EQ(run_command("command -v curl").second, 0) << "curl is not installed (tools/install-deps installs it)";
  test_server srv;
  ASSERT_EQ(replace_all(script, "localhost:8080", "127.0.0.1:" + std::to_string(srv.port())), 1) << script;
  const auto [out, rc] = run_script(script, 20);
  ASSERT_EQ(rc, 0) << out;
  const std::string id = json_string(out, "id");
  const std::string done = wait_state(srv.port(), id, "ok");
  ASSERT_EQ(json_string(done, "state"), "ok") << done;
  const auto result = support::parse_json(json_string(done, "result"));
  ASSERT_TRUE(result.has_value()) << done;
  EXPECT_EQ(result->at("woke_by").as_string(), "children") << done;
  const json::array& children = result->at("children").as_array();
  ASSERT_EQ(children.size(), 3u) << done;
  EXPECT_EQ(children[0].at("state").as_string(), "ok");
  EXPECT_EQ(children[1].at("state").as_string(), "ok");
  // Cancelled at the wait's end: still stopping, or stopped, when the resumed run reads it.
  EXPECT_THAT(std::string(children[2].at("state").as_string()), ::testing::AnyOf("running", "cancelled"));
  const std::string slow(children[2].at("id").as_string());
  std::string stopped;
  EXPECT_TRUE(wait_until([&] {
    stopped = get(srv.port(), "/v1/jobs/" + slow).body;
    return json_string(stopped, "state") == "cancelled";
  })) << stopped;
  EXPECT_EQ(json_string(stopped, "cause"), "parent");
}

}  // namespace
}  // namespace hourglass::server::testing
