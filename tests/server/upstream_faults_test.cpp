// Faulty upstreams thrown at the `call` handler, the way Envoy tests every
// upstream failure mode: a fake upstream (raw TCP on 127.0.0.1, one poll(2)
// thread) refuses, resets, hangs, talks garbage, sheds load or is too slow,
// and the caller must give the outcome docs/reference/http-api.md ("call")
// names, inside its budget, holding no worker and no connection afterwards.
//
// upstream_client exposes no pool counts, so the pool is watched from the
// other end: the fake counts the connections it accepted and those still
// open. A connection the caller keeps after a call is one in its pool; one it
// closed was discarded; the next call shows which was reused.
#include "hourglass/server/upstream_client.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <future>
#include <mutex>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "hourglass/budget_codec.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using steady = std::chrono::steady_clock;

enum class fault {
  none,                 // answers 200 at once, keep-alive
  refuse,               // bound but not listening: connect() gets a RST (ECONNREFUSED)
  reset,                // half a status line, then RST (SO_LINGER 0 + close)
  close_before_answer,  // reads the request, then closes (FIN) without a byte of answer
  hang_after_headers,   // headers with Content-Length: 64, then never the body
  garbage,              // a non-HTTP block that ends in a blank line
  banner,               // one non-HTTP line (an SSH banner), then silence
  answer_503,           // 503 with Retry-After and hourglassd's queue_full body
  answer_504,           // 504 with hourglassd's deadline_exceeded body
  slower_than_budget,   // answers only a second after the budget it was given ran out
  drop_reused,          // answers the first request of a connection; closes on the next
};

constexpr std::string_view ok_body = R"({"from": "fake"})";

std::string response(const std::string& status_line, const std::string& extra, std::string_view body) {
  return "HTTP/1.1 " + status_line + "\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

// The value of a header in a raw request head; nullopt when absent.
std::optional<std::string> header_in(const std::string& head, std::string_view name) {
  std::string lower(head);
  for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const std::string key = "\r\n" + std::string(name) + ":";
  const auto at = lower.find(key);
  if (at == std::string::npos) return std::nullopt;
  auto from = at + key.size();
  while (from < head.size() && head[from] == ' ') ++from;
  return head.substr(from, head.find("\r\n", from) - from);
}

// A misbehaving upstream on 127.0.0.1:<ephemeral>. Every fd is non-blocking
// and served from one thread; destroying it stops the thread and closes all.
class fake_upstream {
 public:
  explicit fake_upstream(fault f) : fault_(f) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0 || ::pipe2(wake_, O_CLOEXEC | O_NONBLOCK))
      throw std::runtime_error("fake upstream: cannot bind");
    port_ = ntohs(a.sin_port);
    // Refusing by not listening keeps the port ours, so nobody else can take it meanwhile.
    if (f != fault::refuse) start_listening();
    thread_ = std::thread([this] { run(); });
  }

  ~fake_upstream() {
    stop_ = true;
    poke();
    thread_.join();
    for (auto& c : conns_) ::close(c.fd);
    ::close(listener_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // From now on it listens and answers every request well.
  void heal() {
    healed_ = true;
    if (!listening_) start_listening();
    poke();
  }

  int accepted() const { return accepted_; }
  int open() const { return open_; }
  int requests() const { return requests_; }
  // Connections the caller closed while a request of theirs was still unanswered.
  int abandoned() const { return abandoned_; }
  std::string last_request_timeout() const {
    std::lock_guard lock(mu_);
    return last_timeout_;
  }
  std::string last_target() const {
    std::lock_guard lock(mu_);
    return last_target_;
  }

 private:
  struct conn {
    int fd = -1;
    std::string in;
    int answered = 0;                             // requests answered in full on it
    bool owes = false;                            // a request of the caller's is unanswered
    bool mute = false;                            // said all it ever will: input ignored
    std::optional<steady::time_point> answer_at;  // slower_than_budget: when the late answer goes out
    bool gone = false;
  };

  void start_listening() {
    if (::listen(listener_, 64) != 0) throw std::runtime_error("fake upstream: cannot listen");
    listening_ = true;
  }

  void poke() {
    const char b = 1;
    [[maybe_unused]] const auto n = ::write(wake_[1], &b, 1);
  }

  static void send_all(int fd, const std::string& bytes) {
    // Small answers on loopback: they fit the socket buffer at once.
    [[maybe_unused]] const auto n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }

  void close_conn(conn& c, bool by_peer) {
    if (by_peer && c.owes) ++abandoned_;
    ::close(c.fd);
    c.gone = true;
    --open_;
  }

  void run() {
    while (!stop_) {
      std::vector<pollfd> fds;
      fds.push_back({wake_[0], POLLIN, 0});
      const bool listening = listening_;
      if (listening) fds.push_back({listener_, POLLIN, 0});
      const std::size_t first_conn = fds.size();
      int timeout_ms = 200;  // only to re-check stop_ should a poke be lost
      const auto now = steady::now();
      for (auto& c : conns_) {
        fds.push_back({c.fd, POLLIN, 0});
        if (c.answer_at) {
          const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*c.answer_at - now).count();
          timeout_ms = std::clamp(static_cast<int>(wait), 0, timeout_ms);
        }
      }
      ::poll(fds.data(), fds.size(), timeout_ms);
      if (fds[0].revents != 0) {
        char buf[64];
        while (::read(wake_[0], buf, sizeof buf) > 0) {
        }
      }
      for (std::size_t i = 0; first_conn + i < fds.size(); ++i) {
        if (fds[first_conn + i].revents != 0) on_readable(conns_[i]);
      }
      if (listening && fds[1].revents != 0) accept_all();  // after: it may grow conns_
      for (auto& c : conns_) {
        if (!c.gone && c.answer_at && steady::now() >= *c.answer_at) {
          c.answer_at.reset();
          c.owes = false;
          send_all(c.fd, response("200 OK", "", ok_body));  // too late: nobody should be listening
        }
      }
      std::erase_if(conns_, [](const conn& c) { return c.gone; });
    }
  }

  void accept_all() {
    for (;;) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      ++accepted_;
      ++open_;
      conns_.push_back(conn{fd});
    }
  }

  void on_readable(conn& c) {
    char buf[4096];
    for (;;) {
      const auto n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (!c.mute) c.in.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return close_conn(c, true);
      break;
    }
    while (!c.gone && !c.mute && !c.owes) {
      const auto end = c.in.find("\r\n\r\n");
      if (end == std::string::npos) return;
      const std::string head = c.in.substr(0, end + 2);
      const std::size_t body = std::stoul(header_in(head, "content-length").value_or("0"));
      if (c.in.size() < end + 4 + body) return;
      c.in.erase(0, end + 4 + body);
      on_request(c, head);
    }
  }

  void on_request(conn& c, const std::string& head) {
    ++requests_;
    const auto timeout = header_in(head, "request-timeout");
    {
      std::lock_guard lock(mu_);
      last_timeout_ = timeout.value_or("");
      const auto sp = head.find(' ');
      last_target_ = head.substr(sp + 1, head.find(' ', sp + 1) - sp - 1);
    }
    c.owes = true;
    const fault f = healed_ ? fault::none : fault_;
    switch (f) {
      case fault::none:
      case fault::refuse:  // healed: it listens now
        return answer(c, response("200 OK", "", ok_body));
      case fault::reset: {
        send_all(c.fd, "HTTP/1.1 200 OK\r\nContent-Ty");
        const linger rst{1, 0};
        ::setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &rst, sizeof rst);
        return close_conn(c, false);
      }
      case fault::close_before_answer: return close_conn(c, false);
      case fault::hang_after_headers:
        send_all(c.fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n");
        c.mute = true;
        return;
      case fault::garbage:
        send_all(c.fd, "\x16\x03\x01 not HTTP at all\r\nreally not\r\n\r\n");
        c.mute = true;
        return;
      case fault::banner:
        send_all(c.fd, "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n");
        c.mute = true;
        return;
      case fault::answer_503:
        return answer(c, response("503 Service Unavailable", "Retry-After: 1\r\n",
                                  R"({"error": "queue_full", "outcome": "rejected", "queued_ms": 0.0})"));
      case fault::answer_504:
        return answer(c, response("504 Gateway Timeout", "",
                                  R"({"error": "deadline_exceeded", "stage": "queue", "budget_ms": 495.0})"));
      case fault::slower_than_budget: {
        const auto budget = timeout ? parse_grpc_timeout(*timeout) : std::nullopt;
        // Well after: a caller that honours its deadline has hung up by then.
        c.answer_at = steady::now() + budget.value_or(std::chrono::seconds(1)) + std::chrono::seconds(1);
        return;
      }
      case fault::drop_reused:
        if (c.answered > 0) return close_conn(c, false);  // as if it had timed the connection out just then
        return answer(c, response("200 OK", "", ok_body));
    }
  }

  void answer(conn& c, const std::string& bytes) {
    send_all(c.fd, bytes);
    c.owes = false;
    ++c.answered;
  }

  const fault fault_;
  int listener_ = -1;
  int wake_[2] = {-1, -1};
  std::uint16_t port_ = 0;
  std::vector<conn> conns_;  // the thread's own
  std::atomic<bool> stop_{false}, healed_{false}, listening_{false};
  std::atomic<int> accepted_{0}, open_{0}, requests_{0}, abandoned_{0};
  mutable std::mutex mu_;
  std::string last_timeout_, last_target_;
  std::thread thread_;
};

constexpr auto budget = std::chrono::milliseconds(500);
constexpr double budget_ms = 500.0;
constexpr double slack_ms = 400.0;
const headers with_budget = {{"grpc-timeout", "500m"}};
const std::string call_body = R"({"upstream": "up", "handler": "work", "body": {"n": 1}})";

server_options calling(const fake_upstream& up) {
  server_options o = test_options();
  o.upstreams["up"] = up.url();
  return o;
}

std::uint64_t finished(const handler_snapshot& h, const std::string& outcome) {
  if (outcome == "ok") return h.finished_ok;
  if (outcome == "error") return h.finished_error;
  if (outcome == "deadline_exceeded") return h.finished_deadline_exceeded;
  if (outcome == "cancelled") return h.finished_cancelled;
  return 0;
}

struct fault_case {
  const char* name;
  fault mode;
  unsigned status;        // what the caller of `call` gets
  const char* outcome;    // the job's outcome
  const char* error;      // the error body's "error"; "" for ok
  const char* stage;      // the error body's "stage"; "" when none
  bool fails_fast;        // known at once: answered before the deadline
  bool reaches_upstream;  // the fake saw the request
  bool caller_hangs_up;   // the caller closed the connection with its request unanswered
  bool stays_pooled;      // the connection is kept for the next call
};

void PrintTo(const fault_case& c, std::ostream* os) { *os << c.name; }

// What the code does, as docs/reference/http-api.md ("call") states it: an
// upstream that cannot be reached or answers 5xx is `call`'s own error (500,
// no Retry-After), where Envoy would answer 503.
const fault_case cases[] = {
    {"refuse", fault::refuse, 500, "error", "upstream_unreachable", "", true, false, false, false},
    {"reset", fault::reset, 500, "error", "upstream_unreachable", "", true, true, false, false},
    {"close_before_answer", fault::close_before_answer, 500, "error", "upstream_unreachable", "", true, true, false,
     false},
    {"hang_after_headers", fault::hang_after_headers, 504, "deadline_exceeded", "deadline_exceeded", "run", false, true,
     true, false},
    {"garbage", fault::garbage, 500, "error", "upstream_unreachable", "", true, true, true, false},
    // One line is enough to tell: the status line is parsed before the header block ends.
    {"banner", fault::banner, 500, "error", "upstream_unreachable", "", true, true, true, false},
    {"answer_503", fault::answer_503, 500, "error", "downstream_error", "", true, true, false, true},
    {"answer_504", fault::answer_504, 504, "deadline_exceeded", "deadline_exceeded", "downstream", true, true, false,
     true},
    {"slower_than_budget", fault::slower_than_budget, 504, "deadline_exceeded", "deadline_exceeded", "run", false, true,
     true, false},
    {"good", fault::none, 200, "ok", "", "", true, true, false, true},
};

class CallToAFaultyUpstream : public ::testing::TestWithParam<fault_case> {};

TEST_P(CallToAFaultyUpstream, EndsAsTheContractSaysWithinTheBudgetAndHoldsNothingAfterwards) {
  const fault_case& c = GetParam();
  fake_upstream up(c.mode);
  test_server caller(calling(up));

  const reply r = post(caller.port(), "/v1/jobs/call", call_body, with_budget, 5s);
  ASSERT_TRUE(r.ok) << r.error;
  const std::string error = json_string(r.body, "error");
  const std::string stage = json_string(r.body, "stage");
  std::printf("[ upstream ] %s: %u %s%s in %.1f ms\n", c.name, r.status,
              r.status == 200 ? "ok" : ("error=" + error).c_str(), stage.empty() ? "" : (" stage=" + stage).c_str(),
              r.elapsed_ms());
  std::fflush(stdout);

  // 1. The outcome and status.
  EXPECT_EQ(r.status, c.status) << r.body;
  if (c.status == 200) {
    EXPECT_EQ(r.body, ok_body);
  } else {
    EXPECT_EQ(error, c.error) << r.body;
    EXPECT_EQ(stage, c.stage) << r.body;
  }
  EXPECT_FALSE(r.header("server-timing").empty()) << "failed jobs carry Server-Timing too";

  // 2. In time: never much past the budget, and a failure known at once is not held to the deadline.
  EXPECT_LT(r.elapsed_ms(), budget_ms + slack_ms);
  if (c.fails_fast) {
    EXPECT_LT(r.elapsed_ms(), budget_ms - 100) << "answered at once, not at the deadline";
  } else {
    EXPECT_GE(r.elapsed_ms(), budget_ms - 1) << "only the deadline ends this wait";
  }

  // The upstream was given the remaining budget less the reserve, never more.
  if (c.reaches_upstream) {
    EXPECT_EQ(up.requests(), 1);
    EXPECT_EQ(up.last_target(), "/v1/jobs/work");
    const auto sent = parse_grpc_timeout(up.last_request_timeout());
    ASSERT_TRUE(sent) << up.last_request_timeout();
    EXPECT_GT(*sent, duration::zero());
    EXPECT_LE(*sent, budget - calling(up).call_reserve);
  } else {
    EXPECT_EQ(up.requests(), 0);
  }

  // 3. Nothing held: the worker is free, the job counted once, and the
  // connection is either pooled (after a complete answer) or closed.
  // (A worker is free before its job's outcome is counted: both are waited for.)
  ASSERT_TRUE(wait_until([&] {
    const auto m = caller.metrics();
    return m.workers_busy == 0 && m.queue_depth == 0 && finished(caller.handler("call"), c.outcome) == 1u;
  }));
  const auto h = caller.handler("call");
  EXPECT_EQ(h.admitted, 1u);
  EXPECT_EQ(finished(h, c.outcome), 1u);
  EXPECT_EQ(h.finished_ok + h.finished_error + h.finished_deadline_exceeded + h.finished_cancelled, 1u);
  EXPECT_EQ(h.completed_late, 0u);
  EXPECT_EQ(up.accepted(), c.mode == fault::refuse ? 0 : 1);
  EXPECT_TRUE(wait_until([&] { return up.open() == (c.stays_pooled ? 1 : 0); }))
      << (c.stays_pooled ? "a complete keep-alive answer leaves the connection pooled"
                         : "a failed connection is closed, not pooled or left open")
      << "; open: " << up.open();
  EXPECT_EQ(up.abandoned(), c.caller_hangs_up ? 1 : 0) << "the caller hung up on an unanswered request";

  // The next call, to a healed upstream, succeeds: a pooled connection is
  // reused, a failed one is not.
  const int accepted = up.accepted();
  up.heal();
  const reply next = post(caller.port(), "/v1/jobs/call", call_body, {{"grpc-timeout", "2S"}}, 5s);
  ASSERT_TRUE(next.ok) << next.error;
  EXPECT_EQ(next.status, 200u) << next.body;
  EXPECT_EQ(next.body, ok_body);
  EXPECT_EQ(up.accepted(), accepted + (c.stays_pooled ? 0 : 1));
  EXPECT_EQ(up.open(), 1) << "one idle connection in the pool, nothing else";
  ASSERT_TRUE(wait_until([&] { return caller.metrics().workers_busy == 0; }));
  EXPECT_EQ(caller.handler("call").finished_ok, finished(h, "ok") + 1);
}

INSTANTIATE_TEST_SUITE_P(UpstreamFaults, CallToAFaultyUpstream, ::testing::ValuesIn(cases),
                         [](const ::testing::TestParamInfo<fault_case>& i) { return std::string(i.param.name); });

TEST(UpstreamFaults, APooledConnectionTheUpstreamDropsAsItIsReusedIsRetriedOnceOnAFreshOne) {
  fake_upstream up(fault::drop_reused);
  test_server caller(calling(up));
  ASSERT_EQ(post(caller.port(), "/v1/jobs/call", call_body, with_budget, 5s).status, 200u);
  ASSERT_EQ(up.open(), 1);

  // The pooled connection looks healthy, so the request goes out on it; the
  // upstream reads it and closes without a byte of answer.
  const reply r = post(caller.port(), "/v1/jobs/call", call_body, with_budget, 5s);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_LT(r.elapsed_ms(), budget_ms - 100) << "retried at once";
  EXPECT_EQ(up.accepted(), 2);
  // Note: the POST reached the upstream twice for one call (the dropped
  // connection had read it in full). Only idempotent handlers are safe here.
  EXPECT_EQ(up.requests(), 3);
  EXPECT_EQ(up.open(), 1);
  EXPECT_EQ(caller.handler("call").finished_ok, 2u);
}

TEST(UpstreamFaults, ACallerWhoHangsUpWhileTheUpstreamIsSlowFreesTheWorkerAndTheUpstreamConnection) {
  fake_upstream up(fault::slower_than_budget);
  test_server caller(calling(up));
  raw_socket s(caller.port());
  ASSERT_TRUE(
      s.send("POST /v1/jobs/call HTTP/1.1\r\nHost: localhost\r\nRequest-Timeout: 5S\r\n"
             "Content-Type: application/json\r\nContent-Length: " +
             std::to_string(call_body.size()) + "\r\n\r\n" + call_body));
  ASSERT_TRUE(wait_until([&] { return up.requests() == 1; }));

  const auto t0 = steady::now();
  s.close();
  // Cancelled (caller gone) at once, far inside the 5 s budget, and the
  // upstream sees its caller go.
  ASSERT_TRUE(wait_until([&] { return caller.handler("call").finished_cancelled == 1; }, 2s));
  ASSERT_TRUE(wait_until([&] { return up.open() == 0 && caller.metrics().workers_busy == 0; }, 2s));
  EXPECT_LT(steady::now() - t0, std::chrono::milliseconds(500));
  EXPECT_EQ(up.abandoned(), 1);
  EXPECT_EQ(caller.handler("call").completed_late, 0u);
}

TEST(UpstreamFaults, ConcurrentCallsToAHungUpstreamAllEndAtTheirDeadlineAndCloseEveryConnection) {
  fake_upstream up(fault::hang_after_headers);
  server_options o = calling(up);
  o.workers = 4;
  test_server caller(o);
  std::vector<std::future<reply>> calls;
  for (int i = 0; i < 4; ++i) {
    calls.push_back(std::async(std::launch::async,
                               [&] { return post(caller.port(), "/v1/jobs/call", call_body, with_budget, 5s); }));
  }
  for (auto& f : calls) {
    const reply r = f.get();
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 504u) << r.body;
    EXPECT_EQ(json_string(r.body, "stage"), "run") << r.body;
    EXPECT_LT(r.elapsed_ms(), budget_ms + slack_ms);
  }
  // One connection per concurrent call (the pool was empty), every one closed after.
  EXPECT_EQ(up.accepted(), 4);
  EXPECT_TRUE(wait_until([&] { return up.open() == 0; })) << "open: " << up.open();
  ASSERT_TRUE(wait_until(
      [&] { return caller.metrics().workers_busy == 0 && caller.handler("call").finished_deadline_exceeded == 4u; }));
  const auto h = caller.handler("call");
  EXPECT_EQ(h.completed_late, 0u);
}

// The client on its own: I/O failures are runtime_error (the handler's 500),
// an abort by the deadline is stopped_error with the context's status.
TEST(UpstreamFaults, TheClientThrowsRuntimeErrorForIOFailuresAndStoppedErrorAtTheDeadline) {
  for (const fault f : {fault::refuse, fault::reset, fault::garbage}) {
    fake_upstream up(f);
    test_server caller(calling(up));
    context_source ctx(real_clock(), real_clock().now() + budget);
    EXPECT_THROW(caller.get().upstreams().post_job(ctx.get(), "up", "work", "", "", ""), std::runtime_error);
    EXPECT_TRUE(wait_until([&] { return up.open() == 0; }));
  }
  fake_upstream up(fault::hang_after_headers);
  test_server caller(calling(up));
  context_source ctx(real_clock(), real_clock().now() + budget);
  try {
    caller.get().upstreams().post_job(ctx.get(), "up", "work", "", "", "");
    ADD_FAILURE() << "the hung call returned";
  } catch (const stopped_error& e) {
    EXPECT_EQ(e.why(), status::expired(expiry_stage::run));
  }
  EXPECT_TRUE(wait_until([&] { return up.open() == 0; }));
}

}  // namespace
}  // namespace hourglass::server::testing
