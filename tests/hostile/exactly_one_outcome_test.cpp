// Exactly one outcome under stress, in the daemon: 20,000 mixed requests
// (sync, async, cancelled by disconnect, DELETEd, expired, refused) from
// many connections at once, against a small queue, then every one
// reconciled against the metrics: offered = admitted + rejected, admitted =
// the sum of outcomes, each outcome as many as the clients saw, nothing
// counted twice (docs/reference/metrics.md, "Accounting").
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>

#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

// What the clients saw, per kind of request.
struct tally {
  std::atomic<std::uint64_t> echo_ok{0}, echo_queue_full{0}, invalid_timeout{0}, insufficient_budget{0};
  std::atomic<std::uint64_t> sleep_expired{0}, sleep_queue_full{0}, sleep_insufficient{0};
  std::atomic<std::uint64_t> async_accepted{0}, deletes_cancelled{0}, disconnects{0};
  std::atomic<std::uint64_t> unexpected{0};
  std::mutex mu;
  std::vector<std::string> async_ids;    // to wait for their outcomes
  std::vector<std::string> deleted_ids;  // DELETEd: each must end cancelled
  std::vector<std::string> surprises;    // the first few unexpected answers

  void surprise(const std::string& what, const reply& r) {
    ++unexpected;
    std::lock_guard lock(mu);
    if (surprises.size() < 5)
      surprises.push_back(what + ": " + std::to_string(r.status) + " " + r.error + " " + r.body);
  }
};

enum class kind { echo, invalid, insufficient, expire, async_ok, async_delete, disconnect };

kind kind_of(int i) {
  switch (i % 20) {
    case 5: return kind::expire;
    case 6:
    case 16: return kind::async_ok;
    case 7: return kind::async_delete;
    case 8:
    case 18: return kind::disconnect;
    case 9: return kind::invalid;
    case 19: return kind::insufficient;
    default: return kind::echo;
  }
}

bool is_queue_full(const reply& r) { return r.status == 503u && json_string(r.body, "error") == "queue_full"; }

void send_one(std::uint16_t port, client& c, int i, tally& t) {
  const headers async_h = {{"Prefer", "respond-async"}};
  switch (kind_of(i)) {
    case kind::echo: {
      const reply r = c.post("/v1/jobs/echo", "x", {{"Request-Timeout", "10S"}});
      if (r.status == 200u) {
        ++t.echo_ok;
      } else if (is_queue_full(r)) {
        ++t.echo_queue_full;
      } else {
        t.surprise("echo", r);
      }
      return;
    }
    case kind::invalid: {
      const reply r = c.post("/v1/jobs/echo", "x", {{"Request-Timeout", "soon"}});
      if (r.status == 400u && json_string(r.body, "error") == "invalid_timeout") {
        ++t.invalid_timeout;
      } else {
        t.surprise("invalid", r);
      }
      return;
    }
    case kind::insufficient: {
      const reply r = c.post("/v1/jobs/echo", "x", {{"Request-Timeout", "100u"}});  // below --min-budget
      // deadline_exceeded, stage admission, counted as rejected{insufficient_budget} only
      // (docs/reference/metrics.md, "Accounting").
      if (r.status == 504u && json_string(r.body, "stage") == "admission") {
        ++t.insufficient_budget;
      } else {
        t.surprise("insufficient", r);
      }
      return;
    }
    case kind::expire: {
      const reply r = c.post("/v1/jobs/sleep", R"({"ms": 1000})", {{"Request-Timeout", "20m"}});
      if (r.status == 504u && json_string(r.body, "stage") == "admission") {
        ++t.sleep_insufficient;  // its 20 ms ran out before it was admitted (a slow build)
      } else if (r.status == 504u && json_string(r.body, "error") == "deadline_exceeded") {
        ++t.sleep_expired;
      } else if (is_queue_full(r)) {
        ++t.sleep_queue_full;
      } else {
        t.surprise("expire", r);
      }
      return;
    }
    case kind::async_ok:
    case kind::async_delete: {
      const bool keep = kind_of(i) == kind::async_ok;
      const reply r = c.post("/v1/jobs/sleep", keep ? R"({"ms": 1})" : R"({"ms": 60000})", async_h);
      if (is_queue_full(r)) {
        ++t.sleep_queue_full;
        return;
      }
      if (r.status != 202u) return t.surprise("async", r);
      ++t.async_accepted;
      const std::string id = json_string(r.body, "id");
      if (keep) {
        std::lock_guard lock(t.mu);
        t.async_ids.push_back(id);
        return;
      }
      // Queued: cancelled at once; running: its context is cancelled and the
      // state follows when the handler has stopped.
      const reply d = c.request("DELETE", "/v1/jobs/" + id);
      if (d.status != 200u && d.status != 202u) return t.surprise("delete", d);
      std::lock_guard lock(t.mu);
      t.deleted_ids.push_back(id);
      return;
    }
    case kind::disconnect: {
      // The whole request, then gone: the server reads it (the bytes come
      // before the FIN), admits or refuses it, and a job it admitted ends
      // cancelled/caller_gone. Nobody sees the answer.
      raw_socket s(port);
      s.send(
          "POST /v1/jobs/sleep HTTP/1.1\r\nHost: localhost\r\nRequest-Timeout: 20S\r\nContent-Length: "
          "13\r\n\r\n{\"ms\": "
          "60000}");
      s.close();
      ++t.disconnects;
      return;
    }
  }
}

// An async job's state once it has ended (polled); empty if it never did.
std::string final_state(client& poll, const std::string& id) {
  std::string state;
  const bool ended = wait_until(
      [&] {
        state = json_string(poll.get("/v1/jobs/" + id).body, "state");
        return state != "queued" && state != "running";
      },
      30s);
  return ended ? state : std::string();
}

TEST(ExactlyOneOutcome, TwentyThousandMixedRequestsReconcileWithTheMetrics) {
  constexpr int kRequests = 20000;
  constexpr int kClients = 16;
  server_options o = test_options();
  o.workers = 4;
  o.queue_capacity = 8;  // fewer than the clients: bursts are refused
  o.min_budget = std::chrono::milliseconds(1);
  o.async_max_jobs = kRequests;
  test_server srv(o);
  tally t;
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int k = 0; k < kClients; ++k) {
    clients.emplace_back([&] {
      client c(srv.port());
      for (int i = next++; i < kRequests; i = next++) send_one(srv.port(), c, i, t);
    });
  }
  for (auto& th : clients) th.join();

  // Quiet: every async job has its outcome, nothing queued or running.
  client poll(srv.port());
  std::uint64_t async_ok = 0;
  std::uint64_t async_expired = 0;
  for (const std::string& id : t.async_ids) {
    const std::string state = final_state(poll, id);
    ASSERT_FALSE(state.empty()) << id << " never ended";
    if (state == "ok") {
      ++async_ok;
    } else if (state == "deadline_exceeded") {
      ++async_expired;
    } else {
      ADD_FAILURE() << "async job " << id << " ended " << state;
    }
  }
  for (const std::string& id : t.deleted_ids) {
    const std::string state = final_state(poll, id);
    ASSERT_FALSE(state.empty()) << id << " never ended";
    if (state == "cancelled") {
      ++t.deletes_cancelled;
    } else {
      ADD_FAILURE() << "DELETEd job " << id << " ended " << state;
    }
  }
  ASSERT_TRUE(wait_until(
      [&] {
        const metrics_snapshot m = srv.metrics();
        return m.queue_depth == 0 && m.workers_busy == 0;
      },
      30s));
  ASSERT_TRUE(wait_until(
      [&] {
        const handler_snapshot s = srv.handler("sleep");
        const std::uint64_t finished = s.finished_ok + s.finished_error + s.finished_deadline_exceeded +
                                       s.finished_cancelled;
        return finished == s.admitted;
      },
      30s))
      << "every admitted job has its outcome";

  EXPECT_EQ(t.unexpected.load(), 0u);
  for (const std::string& s : t.surprises) ADD_FAILURE() << "unexpected answer: " << s;
  const handler_snapshot echo = srv.handler("echo");
  const handler_snapshot sleep = srv.handler("sleep");
  const auto rejected = [](const handler_snapshot& h) {
    return h.rejected_queue_full + h.rejected_insufficient_budget + h.rejected_invalid_timeout +
           h.rejected_shutting_down + h.rejected_broker_unavailable + h.rejected_cancelled;
  };
  const auto finished = [](const handler_snapshot& h) {
    return h.finished_ok + h.finished_error + h.finished_deadline_exceeded + h.finished_cancelled;
  };
  std::uint64_t offered_echo = 0;
  std::uint64_t offered_sleep = 0;
  for (int i = 0; i < kRequests; ++i) {
    const kind k = kind_of(i);
    (k == kind::echo || k == kind::invalid || k == kind::insufficient ? offered_echo : offered_sleep) += 1;
  }
  // Offered = admitted + rejected; admitted = the sum of the outcomes.
  EXPECT_EQ(echo.admitted + rejected(echo), offered_echo);
  EXPECT_EQ(sleep.admitted + rejected(sleep), offered_sleep);
  EXPECT_EQ(finished(echo), echo.admitted);
  EXPECT_EQ(finished(sleep), sleep.admitted);
  // Each family as many as the clients saw.
  EXPECT_EQ(echo.finished_ok, t.echo_ok.load());
  EXPECT_EQ(echo.rejected_queue_full, t.echo_queue_full.load());
  EXPECT_EQ(echo.rejected_invalid_timeout, t.invalid_timeout.load());
  EXPECT_EQ(echo.rejected_insufficient_budget, t.insufficient_budget.load());
  EXPECT_EQ(sleep.finished_ok, async_ok);
  EXPECT_EQ(sleep.finished_deadline_exceeded, t.sleep_expired.load() + async_expired);
  EXPECT_EQ(sleep.expired_queue + sleep.expired_run, sleep.finished_deadline_exceeded)
      << "expired_total breaks deadline_exceeded down by stage";
  // A disconnected request is admitted (then cancelled) or refused as the
  // queue was full: the clients cannot tell which, the sum they can.
  EXPECT_EQ(sleep.finished_cancelled + sleep.rejected_queue_full,
            t.deletes_cancelled.load() + t.disconnects.load() + t.sleep_queue_full.load());
  EXPECT_GE(sleep.rejected_queue_full, t.sleep_queue_full.load());
  EXPECT_EQ(sleep.rejected_insufficient_budget, t.sleep_insufficient.load());
  EXPECT_EQ(sleep.rejected_invalid_timeout, 0u);
  // The mix really was mixed.
  EXPECT_GT(t.echo_ok.load(), 0u);
  EXPECT_GT(t.sleep_expired.load(), 0u);
  EXPECT_GT(t.deletes_cancelled.load(), 0u);
  EXPECT_GT(sleep.finished_cancelled, t.deletes_cancelled.load()) << "some disconnects were admitted and cancelled";
  EXPECT_GT(echo.rejected_queue_full + sleep.rejected_queue_full, 0u) << "the queue filled at times";
  std::cout << "[ one outcome ] " << kRequests << " requests: echo ok " << t.echo_ok << ", queue_full "
            << echo.rejected_queue_full + sleep.rejected_queue_full << ", invalid " << t.invalid_timeout
            << ", insufficient " << t.insufficient_budget << ", expired " << sleep.finished_deadline_exceeded
            << " (queue " << sleep.expired_queue << ", run " << sleep.expired_run << "), async ok " << async_ok
            << ", cancelled " << sleep.finished_cancelled << " (deleted " << t.deletes_cancelled << ")\n";
}

}  // namespace
}  // namespace hourglass::server::testing
