// Child jobs in memory (no --broker): a handler's enqueue_child cuts what
// the child asks for to what its parent has left (minus --call-reserve),
// refuses a child that could not do its minimum in that, links parent and
// child both ways, and a DELETE of the parent cancels its children (cause
// parent). Time is the manual clock's: the budgets are exact.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "child_family.hpp"
#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;

struct HttpServerChildren : ::testing::Test {
  server_options two_workers() {
    server_options o = test_options();
    o.workers = 2;
    return o;
  }
  json::value job(const std::string& id) {
    const auto doc = support::parse_json(c.get("/v1/jobs/" + id).body);
    return doc ? *doc : json::value();
  }
  std::string state(const std::string& id) {
    const json::value j = job(id);
    return j.is_object() ? std::string(j.at("state").as_string()) : "";
  }
  // A running parent, its id.
  std::string start_parent(const std::string& job_deadline) {
    const reply r = c.post("/v1/jobs/parent", "p", {{"Prefer", "respond-async"}, {"Job-Deadline", job_deadline}});
    EXPECT_EQ(r.status, 202u) << r.body;
    const std::string id = json_string(r.body, "id");
    EXPECT_TRUE(wait_until([&] { return state(id) == "running"; }));
    return id;
  }

  manual_clock clk;
  family f;
  test_server srv{two_workers(), [this](http_server& s) { f.setup(s); }, clk};
  client c{srv.port()};
};

// A parent with 3 s, 1 s of it spent: the child asking 10 s carries 2 s
// minus the 5 ms reserve, as its freshness and as its whole deadline.
TEST_F(HttpServerChildren, AChildCarriesWhatItsParentHasLeftNeverWhatItAskedBeyondIt) {
  const std::string parent = start_parent("3S");
  clk.advance(std::chrono::seconds(1));
  f.go = true;
  const std::vector<child_answer> sent = f.sent(1);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].verdict, child_answer::kind::accepted) << sent[0].message;
  EXPECT_EQ(sent[0].deadline, std::chrono::milliseconds(1995));
  EXPECT_EQ(sent[0].freshness, std::chrono::milliseconds(1995));

  const json::value child = job(sent[0].id);
  ASSERT_TRUE(child.is_object());
  EXPECT_EQ(child.at("parent").as_string(), parent);
  const json::value& accepted = child.at("timeline").as_array().at(0);
  EXPECT_EQ(accepted.at("deadline_at_ms").to_number<double>(), 1995.0) << child;
  EXPECT_EQ(accepted.at("freshness_ms").to_number<double>(), 1995.0) << child;
  const json::value p = job(parent);
  ASSERT_EQ(p.at("children").as_array().size(), 1u) << p;
  EXPECT_EQ(p.at("children").as_array().at(0).as_string(), sent[0].id);

  // No child works after its parent's deadline: at 3 s both end, stage run.
  ASSERT_TRUE(wait_until([&] { return f.holding.load() == 2; }));
  clk.advance(std::chrono::milliseconds(1995));
  ASSERT_TRUE(wait_until([&] { return state(sent[0].id) == "deadline_exceeded"; })) << job(sent[0].id);
  EXPECT_EQ(json_string(c.get("/v1/jobs/" + sent[0].id).body, "stage"), "run");
  EXPECT_EQ(state(parent), "running") << "the parent has its 5 ms reserve still";
  clk.advance(std::chrono::milliseconds(5));
  EXPECT_TRUE(wait_until([&] { return state(parent) == "deadline_exceeded"; }));
}

TEST_F(HttpServerChildren, AChildThatCouldNotDoItsMinimumInWhatIsLeftIsRefusedAndNeverQueued) {
  const std::string parent = start_parent("2S");
  clk.advance(std::chrono::milliseconds(1500));  // 500 ms left, 495 after the reserve: under hold's 500 ms minimum
  f.go = true;
  const std::vector<child_answer> sent = f.sent(1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].verdict, child_answer::kind::refused);
  EXPECT_EQ(sent[0].refusal, status::expired(expiry_stage::admission));
  EXPECT_NE(sent[0].message.find("495 ms"), std::string::npos) << sent[0].message;
  EXPECT_TRUE(sent[0].id.empty());
  EXPECT_FALSE(job(parent).as_object().contains("children")) << "nothing was queued";
  EXPECT_EQ(srv.handler("hold").rejected_insufficient_budget, 1u) << "counted as a refusal of its handler";
}

// Two workers: the parent on one, its first child on the other, its second
// child queued. DELETE of the parent ends all three: the parent cancelled
// as asked, each child cancelled because of its parent.
TEST_F(HttpServerChildren, CancellingTheParentCancelsItsQueuedAndRunningChildren) {
  f.children_to_send = 2;
  const std::string parent = start_parent("1M");
  f.go = true;
  const std::vector<child_answer> sent = f.sent(2);
  ASSERT_EQ(sent.size(), 2u);
  ASSERT_TRUE(wait_until([&] { return f.holding.load() == 2; }));
  EXPECT_EQ(state(sent[1].id), "queued");

  const reply d = c.request("DELETE", "/v1/jobs/" + parent);
  EXPECT_TRUE(d.status == 200u || d.status == 202u) << d.body;
  for (const std::string& id : {parent, sent[0].id, sent[1].id}) {
    EXPECT_TRUE(wait_until([&] { return state(id) == "cancelled"; })) << id << " " << job(id);
  }
  EXPECT_EQ(json_string(c.get("/v1/jobs/" + parent).body, "cause"), "requested");
  EXPECT_EQ(json_string(c.get("/v1/jobs/" + sent[0].id).body, "cause"), "parent") << "it was running";
  EXPECT_EQ(json_string(c.get("/v1/jobs/" + sent[1].id).body, "cause"), "parent") << "it never started";
}

// A caller outside names the parent with Job-Parent: the child's whole
// deadline is cut to the parent's (less the reserve), the two are linked,
// and the parent's DELETE reaches it. A parent unknown or malformed is a
// 400, a finished one a 409: nothing is queued.
TEST_F(HttpServerChildren, JobParentFromACallerOutsideCutsTheChildToTheParentsDeadlineAndLinksThem) {
  const std::string parent = start_parent("3S");
  clk.advance(std::chrono::seconds(1));
  const reply r = c.post("/v1/jobs/hold", "x",
                         {{"Prefer", "respond-async"}, {"Job-Parent", parent}, {"Job-Deadline", "10S"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string child = json_string(r.body, "id");
  const json::value j = job(child);
  EXPECT_EQ(j.at("parent").as_string(), parent);
  EXPECT_EQ(j.at("timeline").as_array().at(0).at("deadline_at_ms").to_number<double>(), 1995.0) << j;
  EXPECT_EQ(job(parent).at("children").as_array().at(0).as_string(), child);

  const reply unknown = c.post("/v1/jobs/hold", "x",
                               {{"Prefer", "respond-async"}, {"Job-Parent", std::string(32, 'a')}});
  EXPECT_EQ(unknown.status, 400u) << unknown.body;
  EXPECT_EQ(json_string(unknown.body, "error"), "invalid_parent");
  const reply malformed = c.post("/v1/jobs/hold", "x", {{"Prefer", "respond-async"}, {"Job-Parent", "../etc"}});
  EXPECT_EQ(malformed.status, 400u) << malformed.body;
  EXPECT_EQ(json_string(malformed.body, "error"), "invalid_parent");

  const unsigned deleted = c.request("DELETE", "/v1/jobs/" + parent).status;
  ASSERT_TRUE(deleted == 202u || deleted == 200u) << deleted << ": 200 when it stopped before the answer was read";
  ASSERT_TRUE(wait_until([&] { return state(parent) == "cancelled" && state(child) == "cancelled"; }));
  EXPECT_EQ(json_string(c.get("/v1/jobs/" + child).body, "cause"), "parent");
  const reply late = c.post("/v1/jobs/hold", "x", {{"Prefer", "respond-async"}, {"Job-Parent", parent}});
  EXPECT_EQ(late.status, 409u) << late.body;
  EXPECT_EQ(json_string(late.body, "error"), "parent_finished");
}

// guards.md's curl example, run as written against this daemon (its port
// for 8080): the child it adds to a parent with 2 s left carries 1,995 ms.
TEST_F(HttpServerChildren, TheGuardsCurlExampleRunsAsWritten) {
  std::string script = doc_block("docs/guards.md", "<!-- child-curl-example");
  ASSERT_FALSE(script.empty());
  ASSERT_EQ(run_command("command -v curl").second, 0) << "curl is not installed (tools/install-deps installs it)";
  ASSERT_EQ(replace_all(script, "localhost:8080", "127.0.0.1:" + std::to_string(srv.port())), 1) << script;
  const std::string parent = start_parent("3S");
  clk.advance(std::chrono::seconds(1));
  const auto [out, rc] = run_script("PARENT=" + parent + "\n" + script, 20);
  ASSERT_EQ(rc, 0) << out;
  const std::string child = json_string(out, "id");
  ASSERT_EQ(child.size(), 32u) << out;
  const json::value j = job(child);
  EXPECT_EQ(j.at("parent").as_string(), parent);
  EXPECT_EQ(j.at("timeline").as_array().at(0).at("deadline_at_ms").to_number<double>(), 1995.0) << j;
}

// A family grows within --max-children and --max-job-depth: past either,
// 409 and nothing held; the root's DELETE ends the whole family.
TEST(HttpServerFamilyBounds, AChildPastEitherBoundIsA409) {
  server_options o = test_options();
  o.max_children = 2;
  o.max_job_depth = 2;
  test_server srv(o);
  family_bounds_hold(srv.port());
}

}  // namespace
}  // namespace hourglass::server::testing
