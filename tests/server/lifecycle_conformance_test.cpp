// One job life under both stores. Each row is a script of what a client
// does and what the job's handler does, with the lifecycle events
// (hourglass/jobs/lifecycle.hpp) each step causes. The pure rule folds the
// events into the state the job must reach; the memory store (on a manual
// clock) and the fleet store (a real redis-server, on the broker's clock)
// each run the script through a real daemon, and at every checkpoint their
// job objects must show that state and agree with each other field by
// field (attempt, attempts left, stage, cause, woke_by, wakes, its
// children's ends). Where the stores must differ, a test says so: memory
// mode has no dead letter (its workers are the daemon's own threads, which
// cannot die apart from it), so a replay or purge answers 409
// dead_letter_unsupported (http_server_queue_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fleet/redis_server.hpp"
#include "hourglass/jobs/lifecycle.hpp"
#include "hourglass/server/http_server.hpp"
#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace lifecycle_conformance {

using namespace std::chrono_literals;
namespace json = boost::json;
using jobs::job_event;
using jobs::job_facts;
using jobs::job_state;

// Long enough that a real-time store shows the state it waits in before it
// moves on; the manual clock steps over it at once.
constexpr duration step_time = 1s;

// The handler "life": a job's nth run (attempts and resumed runs alike)
// does the nth word of its body.
//   ok        answers "done"
//   fail      a retryable error (503 upstream_down)
//   hold      runs until its context ends (a cancel)
//   children  enqueues two children (body "ok") and waits for all of them
//   kids_hold enqueues two children (body "hold") and waits for all of them
//   kids_wake as kids_hold, its wait ending step_time before its deadline
//   signal    waits for the signal "approve", for at most step_time
struct life {
  std::mutex mu;
  std::map<std::string, int, std::less<>> runs;  // by job id

  void setup(http_server& s) {
    handler_options o;
    o.retry = {.max_attempts = 3, .base = step_time, .cap = step_time, .jitter = false};
    s.add_handler(
        "life",
        [this, &s](const context& ctx, const request_view& req) {
          const std::string word = word_for(req);
          if (word == "fail") throw handler_error(503, "upstream_down", "the upstream is down");
          if (word == "hold") {
            while (!ctx.done()) ctx.sleep_for(5ms);
            ctx.check();
          }
          if (word == "children" || word == "kids_hold" || word == "kids_wake") {
            for (int i = 0; i < 2; ++i) {
              (void)s.enqueue_child(ctx, req, {.handler = "life", .body = word == "children" ? "ok" : "hold"});
            }
            fan_in all = fan_in::all();
            if (word == "kids_wake") all.keep = step_time;
            return handler_result::wait_for(all);
          }
          if (word == "signal") return handler_result::wait_for_signal("approve", step_time);
          return handler_result{"done", "text/plain"};
        },
        o);
  }
  std::string word_for(const request_view& req) {
    int n = 0;
    {
      std::lock_guard lock(mu);
      n = runs[std::string(req.job_id)]++;
    }
    std::istringstream words{std::string(req.body)};
    std::string w;
    for (int i = 0; i <= n && std::getline(words, w, ',');) ++i;
    return w;
  }
};

// What a client does before a checkpoint.
enum class act { submit, let_time_pass, cancel, signal };

struct checkpoint {
  act before;
  std::vector<std::pair<job_event, job_facts>> events;  // the rule's, since the last checkpoint
  std::string children = "";                            // its children's ends, when it has any
};

struct script {
  std::string name;
  std::string body;
  headers hs;
  job_state accepted = job_state::queued;  // scheduled: accepted delayed
  std::vector<checkpoint> checkpoints;
  bool behind_busy_workers = false;  // submitted while jobs that hold occupy every worker
};

// One store under a daemon: memory on a manual clock, or a fleet member.
struct store {
  virtual ~store() = default;
  virtual std::uint16_t port() = 0;
  virtual void let_time_pass(duration d) = 0;
};

struct memory_store final : store {
  memory_store()
      : server(
            test_options(), [this](http_server& s) { handlers.setup(s); }, clk) {}
  std::uint16_t port() override { return server.port(); }
  void let_time_pass(duration d) override { clk.advance(d); }
  manual_clock clk;
  life handlers;
  test_server server;
};

struct fleet_store final : store {
  fleet_store() : server(options(), [this](http_server& s) { handlers.setup(s); }) {}
  server_options options() {
    server_options o = test_options();
    o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
    o.consumer = "conformance";
    o.workers = 4;
    return o;
  }
  std::uint16_t port() override { return server.port(); }
  void let_time_pass(duration) override {}  // the broker's clock runs on its own: checkpoints wait for it
  fleet::testing::redis_server redis;
  life handlers;
  test_server server;
};

std::string text(const json::object& j, const char* key) {
  const json::value* v = j.if_contains(key);
  if (v == nullptr) return "-";
  if (v->is_string()) return std::string(v->as_string());
  return support::serialize_json(*v);
}

// The fields both stores must agree on, in one line.
std::string view_line(const json::object& j) {
  std::string out;
  for (const char* key : {"state", "attempt", "attempts_left", "stage", "cause", "reason", "error", "woke_by", "wakes",
                          "cancel_requested", "waiting_for"}) {
    out += std::string(key) + "=" + text(j, key) + " ";
  }
  return out;
}

// Its children's ends ("cancelled/parent ok ..."), in a stable order.
std::string children_line(std::uint16_t port, const json::object& j) {
  const json::value* kids = j.if_contains("children");
  if (kids == nullptr) return "";
  std::vector<std::string> ends;
  for (const json::value& id : kids->as_array()) {
    const json::value child = job_object(port, std::string(id.as_string()));
    const json::object& c = child.as_object();
    ends.push_back(text(c, "state") + (c.contains("cause") ? "/" + text(c, "cause") : ""));
  }
  std::sort(ends.begin(), ends.end());
  std::string out;
  for (const std::string& e : ends) out += (out.empty() ? "" : " ") + e;
  return out;
}

// Jobs that hold every worker of `st` (test_options: 4), running before it returns.
std::vector<std::string> occupy_workers(store& st) {
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    const reply r = post(st.port(), "/v1/jobs/life", "hold", {{"Prefer", "respond-async"}});
    EXPECT_EQ(r.status, 202u) << r.body;
    ids.push_back(json_string(r.body, "id"));
  }
  for (const std::string& id : ids) {
    EXPECT_TRUE(wait_until([&] { return json_string(get(st.port(), "/v1/jobs/" + id).body, "state") == "running"; }));
  }
  return ids;
}

void release_workers(store& st, const std::vector<std::string>& ids) {
  for (const std::string& id : ids) (void)client(st.port()).request("DELETE", "/v1/jobs/" + id);
  for (const std::string& id : ids) {
    EXPECT_TRUE(wait_until([&] { return json_string(get(st.port(), "/v1/jobs/" + id).body, "state") == "cancelled"; }));
  }
}

// Runs `s` on `st`: at each checkpoint, the job in the state the rule
// reached, and the line of its view.
std::vector<std::string> run_script(store& st, const script& s) {
  std::vector<std::string> lines;
  job_state rule = s.accepted;
  int attempt = 0;  // as the rule counts them: a resumed run goes on with its attempt
  bool resumed = false;
  jobs::woke_by woke = jobs::woke_by::none;  // why its last run resumed, as the rule says
  std::string id;
  const std::vector<std::string> holders = s.behind_busy_workers ? occupy_workers(st) : std::vector<std::string>{};
  for (const checkpoint& cp : s.checkpoints) {
    switch (cp.before) {
      case act::submit: {
        headers hs = s.hs;
        hs.emplace_back("Prefer", "respond-async");
        const reply r = post(st.port(), "/v1/jobs/life", s.body, hs);
        if (r.status != 202u) {
          ADD_FAILURE() << s.name << ": " << r.status << " " << r.body;
          return lines;
        }
        id = json_string(r.body, "id");
        break;
      }
      case act::let_time_pass: st.let_time_pass(step_time); break;
      case act::cancel: {
        const reply r = client(st.port()).request("DELETE", "/v1/jobs/" + id);
        EXPECT_TRUE(r.status == 200u || r.status == 202u) << r.body;  // 202: a running job's cancel is under way
        break;
      }
      case act::signal: {
        const reply r = post(st.port(), "/v1/jobs/" + id + "/signals/approve", "yes");
        EXPECT_EQ(r.status, 200u) << r.body;
        break;
      }
    }
    for (const auto& [e, facts] : cp.events) {
      const jobs::job_step step = jobs::on_job_event(rule, e, facts);
      EXPECT_TRUE(step.applies) << s.name << ": the script's own event does not apply";
      rule = step.next;
      if (jobs::has(step.actions, jobs::count_attempt) && !resumed) ++attempt;
      if (jobs::has(step.actions, jobs::count_attempt)) resumed = false;
      if (jobs::has(step.actions, jobs::wake_count)) {
        resumed = true;
        woke = step.woke;
      }
    }
    // A store on real time may show the state the rule reached before its
    // last step (scheduled again, for a retry): the attempt tells them apart.
    const std::string want(jobs::to_string(rule));
    std::string last;
    wait_until(
        [&] {
          last = get(st.port(), "/v1/jobs/" + id).body;
          return json_string(last, "state") == want &&
                 (attempt == 0 || json_number(last, "attempt") == static_cast<double>(attempt));
        },
        15s);
    EXPECT_EQ(json_string(last, "state"), want) << s.name << ": " << last;
    if (attempt > 0) {
      EXPECT_EQ(json_number(last, "attempt"), attempt) << s.name << ": " << last;
    }
    if (woke != jobs::woke_by::none) {
      EXPECT_EQ(json_string(last, "woke_by"), jobs::to_string(woke)) << s.name << ": " << last;
    }
    const auto doc = support::parse_json(last);
    if (!doc || !doc->is_object()) {
      lines.emplace_back("no job object");
      continue;
    }
    std::string line = view_line(doc->as_object());
    if (!cp.children.empty()) {
      std::string kids;
      wait_until([&] { return (kids = children_line(st.port(), doc->as_object())) == cp.children; });
      line += "children=" + kids;
    }
    lines.push_back(std::move(line));
  }
  release_workers(st, holders);
  return lines;
}

std::vector<script> scripts() {
  const job_facts none{};
  const job_facts ok{};
  const job_facts failed{.ended_with = outcome::error};
  const job_facts over{.wait_over = true};
  const job_facts for_signal{.waits_for_signal = true};
  const job_facts stopped{.ended_with = outcome::cancelled};
  using ev = job_event;
  return {
      {"fails, its retry is due, then ok",
       "fail,ok",
       {},
       job_state::queued,
       {{act::submit, {{ev::started, none}, {ev::ended_retryable, none}}},
        {act::let_time_pass, {{ev::due, none}, {ev::started, none}, {ev::ended, ok}}}}},
      {"fails on every attempt",
       "fail,fail,fail",
       {},
       job_state::queued,
       {{act::submit, {{ev::started, none}, {ev::ended_retryable, none}}},
        {act::let_time_pass, {{ev::due, none}, {ev::started, none}, {ev::ended_retryable, none}}},
        {act::let_time_pass, {{ev::due, none}, {ev::started, none}, {ev::ended, failed}}}}},
      {"delayed, then due",
       "ok",
       {{"Job-Delay", "1S"}},
       job_state::scheduled,
       {{act::submit, {}}, {act::let_time_pass, {{ev::due, none}, {ev::started, none}, {ev::ended, ok}}}}},
      {"cancelled while delayed",
       "ok",
       {{"Job-Delay", "30S"}},
       job_state::scheduled,
       {{act::submit, {}}, {act::cancel, {{ev::cancel_asked, none}}}}},
      {"cancelled while it runs",
       "hold",
       {},
       job_state::queued,
       {{act::submit, {{ev::started, none}}}, {act::cancel, {{ev::cancel_asked, none}, {ev::ended, stopped}}}}},
      {"waits for its children, who end ok",
       "children,ok",
       {},
       job_state::queued,
       {{act::submit,
         {{ev::started, none},
          {ev::waits_for_children, none},
          {ev::child_ended, over},
          {ev::started, none},
          {ev::ended, ok}},
         "ok ok"}}},
      {"cancelled while it waits for its children",
       "kids_hold",
       {},
       job_state::queued,
       {{act::submit, {{ev::started, none}, {ev::waits_for_children, none}}},
        {act::cancel, {{ev::cancel_asked, none}}, "cancelled/parent cancelled/parent"}}},
      {"wakes before its deadline while its children still run",
       "kids_wake,ok",
       {{"Job-Deadline", "3500m"}},  // wakes 2.5 s in: a real clock reads it waiting three times first
       job_state::queued,
       {{act::submit, {{ev::started, none}, {ev::waits_for_children, none}}},
        {act::let_time_pass, {}},
        {act::let_time_pass, {}},
        {act::let_time_pass,
         {{ev::woke, none}, {ev::started, none}, {ev::ended, ok}},
         "cancelled/parent cancelled/parent"}}},
      {"cancelled while queued",
       "ok",
       {},
       job_state::queued,
       {{act::submit, {}}, {act::cancel, {{ev::cancel_asked, none}}}},
       true},
      {"waits for a signal, which comes",
       "signal,ok",
       {},
       job_state::queued,
       {{act::submit, {{ev::started, none}, {ev::waits_for_signal, none}}},
        {act::signal, {{ev::signalled, for_signal}, {ev::started, none}, {ev::ended, ok}}}}},
      {"waits for a signal past its limit",
       "signal,ok",
       {},
       job_state::queued,
       {{act::submit, {{ev::started, none}, {ev::waits_for_signal, none}}},
        {act::let_time_pass, {{ev::wait_limit, for_signal}}}}},
      {"cancelled while it waits for a signal",
       "signal,ok",
       {},
       job_state::queued,
       {{act::submit, {{ev::started, none}, {ev::waits_for_signal, none}}}, {act::cancel, {{ev::cancel_asked, none}}}}},
  };
}

TEST(LifecycleConformance, BothStoresLiveEachScriptAsTheRuleSays) {
  memory_store memory;
  fleet_store fleet;
  for (const script& s : scripts()) {
    SCOPED_TRACE(s.name);
    const std::vector<std::string> in_memory = run_script(memory, s);
    const std::vector<std::string> in_fleet = run_script(fleet, s);
    ASSERT_EQ(in_memory.size(), in_fleet.size());
    for (std::size_t i = 0; i < in_memory.size(); ++i) {
      EXPECT_EQ(in_memory[i], in_fleet[i]) << "checkpoint " << i + 1 << " (memory, then fleet)";
    }
  }
}

// What a client is answered at the door, as one line per request: a
// repeated Idempotency-Key names the first job (settled: memory mode kept
// no keys), a malformed one is refused (settled: memory mode never looked),
// a delay that leaves less than the minimum budget before the job's
// deadline is refused at admission, and so is a freshness shorter than it.
std::vector<std::string> door_answers(store& st) {
  std::vector<std::string> lines;
  const auto send = [&](const std::string& key, headers hs = {}) {
    hs.emplace_back("Prefer", "respond-async");
    if (!key.empty()) hs.emplace_back("Idempotency-Key", key);
    const reply r = post(st.port(), "/v1/jobs/life", "ok", hs);
    const auto doc = support::parse_json(r.body);
    std::string line = std::to_string(r.status);
    if (doc && doc->is_object()) {
      for (const char* k : {"duplicate", "error", "stage"})
        line += std::string(" ") + k + "=" + text(doc->as_object(), k);
    }
    lines.push_back(line);
    return json_string(r.body, "id");
  };
  const std::string first = send("order-17");
  const std::string again = send("order-17");
  EXPECT_EQ(again, first) << "one job per key";
  EXPECT_FALSE(first.empty());
  EXPECT_NE(send("order-18"), first);
  send(std::string(129, 'k'));
  send("tab\there");
  send("", {{"Job-Delay", "2S"}, {"Job-Deadline", "1S"}});
  // Less freshness than the handler's minimum budget (--min-budget, 1 ms):
  // settled, memory mode admitted it (a start bound without the budget).
  send("", {{"Job-Freshness", "500u"}});
  send("", {{"Job-Deadline", "500u"}});
  return lines;
}

TEST(LifecycleConformance, BothStoresAnswerTheDoorAlike) {
  memory_store memory;
  fleet_store fleet;
  const std::vector<std::string> in_memory = door_answers(memory);
  EXPECT_EQ(in_memory, door_answers(fleet));
  ASSERT_EQ(in_memory.size(), 8u);
  EXPECT_EQ(in_memory[1], "202 duplicate=true error=- stage=-");
  EXPECT_EQ(in_memory[3], "400 duplicate=- error=invalid_idempotency_key stage=-");
  EXPECT_EQ(in_memory[5], "504 duplicate=- error=deadline_exceeded stage=admission");
  EXPECT_EQ(in_memory[6], "504 duplicate=- error=deadline_exceeded stage=admission");
  EXPECT_EQ(in_memory[7], "504 duplicate=- error=deadline_exceeded stage=admission");
}

}  // namespace lifecycle_conformance
}  // namespace hourglass::server::testing
