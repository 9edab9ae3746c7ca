// Hostile clients over loopback, bounded in count and time: slowloris at a
// thousand connections, a client that never reads, connection floods,
// descriptor exhaustion, and request smuggling shapes. What must hold: the
// attackers are cut off by the server's own timeouts and bounds, the
// legitimate requests keep their latency, descriptors come back, and no
// refused request ever enqueues a job.
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <iostream>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "common/sanitized.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using steady = std::chrono::steady_clock;

// Under the sanitizers a connection costs several times more and timing
// means little: fewer attackers, longer timeouts, and latency is judged in
// the Release build only (the figures are printed in every build).
constexpr bool kSanitized = hourglass::testing::sanitized;

std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Raises this process's descriptor limit to `want` (both ends of every
// loopback connection live in it); false when the hard limit is lower.
bool allow_fds(rlim_t want) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return false;
  if (r.rlim_cur >= want) return true;
  if (r.rlim_max < want) return false;
  r.rlim_cur = want;
  return ::setrlimit(RLIMIT_NOFILE, &r) == 0;
}

// A connected TCP socket to 127.0.0.1:port, non-blocking; -1 on failure.
int connect_nonblocking(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

// Legitimate traffic: `n` sequential 10 ms jobs on one keep-alive connection.
std::vector<double> legit_latencies_ms(std::uint16_t port, int n) {
  client c(port);
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const reply r = c.post("/v1/jobs/sleep", R"({"ms": 10})", {{"Request-Timeout", "5S"}});
    if (!r.ok || r.status != 200u) return {};
    ms.push_back(r.elapsed_ms());
  }
  return ms;
}

std::uint64_t admitted_total(test_server& srv) {
  std::uint64_t n = 0;
  for (const auto& h : srv.metrics().handlers) n += h.admitted;
  return n;
}

double connections_open(std::uint16_t port) {
  return metric_value(get(port, "/metrics").body, "hourglass_http_connections_open");
}

// Waits for the server to close each of `fds` (EOF or reset), sending the
// next byte of `trickle` to every open one each second (1 byte/s); the time
// each was closed, or nullopt for those still open at `limit`.
std::vector<std::optional<steady::time_point>> trickle_until_closed(const std::vector<int>& fds,
                                                                    const std::string& trickle,
                                                                    std::chrono::milliseconds limit,
                                                                    std::string* unexpected_bytes) {
  std::vector<std::optional<steady::time_point>> closed(fds.size());
  std::vector<std::size_t> sent(fds.size(), 1);  // the first byte went with the connect
  const steady::time_point end = steady::now() + limit;
  steady::time_point next_tick = steady::now() + 1s;
  std::size_t open = fds.size();
  std::vector<pollfd> pfds;
  std::vector<std::size_t> index;
  while (open > 0 && steady::now() < end) {
    pfds.clear();
    index.clear();
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (closed[i]) continue;
      pfds.push_back({fds[i], POLLIN, 0});
      index.push_back(i);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - steady::now());
    ::poll(pfds.data(), pfds.size(), static_cast<int>(std::max<std::int64_t>(0, wait.count())));
    for (std::size_t k = 0; k < pfds.size(); ++k) {
      if (pfds[k].revents == 0) continue;
      char buf[512];
      const ssize_t n = ::recv(pfds[k].fd, buf, sizeof buf, 0);
      if (n > 0) {
        unexpected_bytes->append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        closed[index[k]] = steady::now();
        --open;
      }
    }
    if (steady::now() >= next_tick) {
      next_tick += 1s;
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (closed[i] || sent[i] >= trickle.size()) continue;
        if (::send(fds[i], trickle.data() + sent[i], 1, MSG_NOSIGNAL) == 1) ++sent[i];
      }
    }
  }
  return closed;
}

// ---- slowloris ---------------------------------------------------------------

TEST(HostileClients, SlowlorisAtAThousandConnectionsIsCutOffByTheHeaderTimeoutAndLegitLatencyHolds) {
  constexpr std::size_t kAttackers = kSanitized ? 250 : 1000;
  constexpr int kLegit = 250;  // a p99 that is not just the worst sample
  ASSERT_TRUE(allow_fds(4 * kAttackers + 512)) << "this test needs a descriptor limit of " << 4 * kAttackers + 512;
  server_options o = test_options();
  o.header_timeout = kSanitized ? 10s : 6s;  // the legit requests all run before the first attacker is cut off
  o.max_connections = kAttackers + 64;       // the bound is not the defence here: the header timeout is
  o.workers = 4;
  test_server srv(o);
  const std::vector<double> before = legit_latencies_ms(srv.port(), kLegit);
  ASSERT_EQ(before.size(), static_cast<std::size_t>(kLegit));

  const std::size_t fds_before = open_fds();
  // Headers that never end, one byte a second.
  const std::string trickle = "POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + std::string(200, 's');
  std::vector<int> fds;
  std::vector<steady::time_point> first_byte;
  for (std::size_t i = 0; i < kAttackers; ++i) {
    const int fd = connect_nonblocking(srv.port());
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    first_byte.push_back(steady::now());  // before the send: the server's timer cannot start earlier
    ASSERT_EQ(::send(fd, trickle.data(), 1, MSG_NOSIGNAL), 1);
    fds.push_back(fd);
  }
  // Both ends of each (the server may still be closing the legit client's).
  ASSERT_TRUE(wait_until([&] { return open_fds() + 4 >= fds_before + 2 * kAttackers; }))
      << "all the attackers' connections were open at once: " << open_fds() - fds_before << " descriptors";
  const steady::time_point attack_ready = steady::now();

  auto during = std::async(std::launch::async, [&] {
    std::vector<double> ms = legit_latencies_ms(srv.port(), kLegit);
    return std::make_pair(ms, steady::now());
  });
  std::string unexpected;
  const auto closed = trickle_until_closed(
      fds, trickle, std::chrono::duration_cast<std::chrono::milliseconds>(o.header_timeout + 10s), &unexpected);
  const auto [after_ms, legit_done] = during.get();
  for (const int fd : fds) ::close(fd);

  ASSERT_EQ(after_ms.size(), static_cast<std::size_t>(kLegit));
  steady::time_point first_cut = steady::time_point::max();
  for (std::size_t i = 0; i < kAttackers; ++i) {
    ASSERT_TRUE(closed[i].has_value()) << "attacker " << i << " was never cut off";
    EXPECT_GE(*closed[i] - first_byte[i], o.header_timeout) << "attacker " << i << " cut off early";
    EXPECT_LE(*closed[i] - first_byte[i], o.header_timeout + 5s) << "attacker " << i;
    first_cut = std::min(first_cut, *closed[i]);
  }
  EXPECT_TRUE(unexpected.empty()) << "a slow client gets no answer, only a closed connection: " << unexpected;
  EXPECT_LT(legit_done, first_cut) << "the legitimate requests ran while the attack was on";
  const double p99_before = percentile(before, 0.99);
  const double p99_during = percentile(after_ms, 0.99);
  std::cout << "[ slowloris ] " << kAttackers << " connections at 1 byte/s: legit p99 " << p99_before << " ms before, "
            << p99_during << " ms during (x" << p99_during / p99_before << "); attack ready "
            << std::chrono::duration<double, std::milli>(attack_ready - first_byte.front()).count()
            << " ms after the first connect\n";
  if (!kSanitized) {
    EXPECT_LE(p99_during, 2 * p99_before) << "legit p99 within 2x of the same requests without the attack";
  }
  // Every descriptor comes back: the server closed its side of each.
  EXPECT_TRUE(wait_until([&] { return open_fds() <= fds_before + 4; })) << open_fds() << " vs " << fds_before;
  EXPECT_EQ(srv.handler("echo").admitted, 0u);
  // A closed connection leaves the gauge when its session is destroyed, a
  // moment after its socket closed (seen once in four runs under ASan).
  EXPECT_TRUE(wait_until([&] { return connections_open(srv.port()) == 1.0; }))
      << connections_open(srv.port()) << " open; only the /metrics request's own should be";
}

// ---- a client that never reads ------------------------------------------------

TEST(HostileClients, AClientThatNeverReadsItsAnswerIsCutOffByTheWriteTimeoutWithoutHoldingAWorker) {
  server_options o = test_options();
  o.write_timeout = kSanitized ? 8s : 2s;  // each response write's bound
  o.max_body = 64u << 20;
  test_server srv(o);
  // An answer far larger than both sockets' buffers can hold.
  const std::string body(24u << 20, 'r');
  raw_socket s(srv.port());
  ASSERT_TRUE(s.send("POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nRequest-Timeout: 20S\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body));
  ASSERT_TRUE(wait_until([&] { return srv.handler("echo").finished_ok == 1; }, 20s));
  const auto t0 = steady::now();
  EXPECT_EQ(srv.metrics().workers_busy, 0) << "the stalled write holds no worker";
  ASSERT_TRUE(wait_until([&] { return connections_open(srv.port()) == 1.0; }, 20s))
      << "the stalled connection was never closed";
  EXPECT_LT(steady::now() - t0, o.write_timeout + 3s);
  // What the client finds when it finally reads: a cut-off answer.
  const auto [got, was_closed] = s.read_until_close(5s);
  EXPECT_TRUE(was_closed);
  EXPECT_LT(got.size(), body.size());
  EXPECT_EQ(post(srv.port(), "/v1/jobs/echo", "next").status, 200u);
}

// ---- floods and descriptor exhaustion -----------------------------------------------

TEST(HostileClients, AFloodPastMaxConnectionsIsShedWhileTheAdmittedConnectionsKeepWorking) {
  constexpr std::size_t kLimit = 50;
  constexpr std::size_t kFlood = 500;
  ASSERT_TRUE(allow_fds(4 * (kLimit + kFlood) + 512));
  server_options o = test_options();
  o.max_connections = kLimit;
  test_server srv(o);
  std::vector<std::unique_ptr<client>> admitted;
  for (std::size_t i = 0; i < kLimit; ++i) {
    admitted.push_back(std::make_unique<client>(srv.port()));
    ASSERT_EQ(admitted.back()->get("/healthz").status, 200u) << i;
  }
  std::vector<int> flood;
  for (std::size_t i = 0; i < kFlood; ++i) {
    const int fd = connect_nonblocking(srv.port());
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ::send(fd, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n", 35, MSG_NOSIGNAL);
    flood.push_back(fd);
  }
  std::string unexpected;
  const auto closed = trickle_until_closed(flood, "", 10s, &unexpected);
  for (const int fd : flood) ::close(fd);
  EXPECT_EQ(std::count_if(closed.begin(), closed.end(), [](const auto& c) { return c.has_value(); }),
            static_cast<std::ptrdiff_t>(kFlood))
      << "every connection past the bound is closed at once";
  EXPECT_TRUE(unexpected.empty()) << unexpected;
  for (auto& c : admitted) EXPECT_EQ(c->get("/healthz").status, 200u) << "open connections keep working";
  admitted.clear();
  ASSERT_TRUE(wait_until([&] { return get(srv.port(), "/healthz").status == 200u; }));
}

// The daemon's "accept failed: ...; N failures since the last line" lines:
// when each was logged (ms into its day) and the N it stands for.
struct accept_failure_line {
  long ms_of_day = 0;
  std::uint64_t failures = 0;
};
std::vector<accept_failure_line> accept_failure_lines(const std::string& log) {
  std::vector<accept_failure_line> out;
  std::size_t line_at = 0;
  while (line_at < log.size()) {
    const auto eol = std::min(log.find('\n', line_at), log.size());
    const std::string line = log.substr(line_at, eol - line_at);
    line_at = eol + 1;
    const auto failed = line.find("accept failed");
    const auto count_end = line.find(" failures since the last line");
    const auto count_at = line.rfind("; ", count_end);
    // "2024-01-02T03:04:05.678 warning accept failed: ..."
    if (failed == std::string::npos || count_end == std::string::npos || count_at == std::string::npos ||
        line.size() < 23 || line[10] != 'T') {
      continue;
    }
    const long h = std::strtol(line.c_str() + 11, nullptr, 10);
    const long m = std::strtol(line.c_str() + 14, nullptr, 10);
    const long sec = std::strtol(line.c_str() + 17, nullptr, 10);
    const long ms = std::strtol(line.c_str() + 20, nullptr, 10);
    out.push_back({((h * 60 + m) * 60 + sec) * 1000 + ms, std::strtoull(line.c_str() + count_at + 2, nullptr, 10)});
  }
  return out;
}

TEST(HostileClients, TheAcceptLoopSurvivesRunningOutOfDescriptorsAndServesOnceTheyComeBack) {
  // A daemon of its own, with 64 descriptors: far fewer than the connections below.
  // Not under the sanitizers: UBSan's vptr check probes memory through a
  // pipe, which a process out of descriptors cannot open, so it reports the
  // EMFILE error's category as "invalid vptr" and, built not to recover,
  // kills the daemon. Reported as skipped (SKIP_REGULAR_EXPRESSION), not passed.
  if (kSanitized) GTEST_SKIP() << "needs descriptors the sanitizer runtime takes for itself";
  daemon_process d({"--listen", "127.0.0.1:0", "--workers", "2"}, {"prlimit", "--nofile=64:64"});
  const std::uint16_t port = d.wait_for_port();
  ASSERT_NE(port, 0) << d.output();
  std::vector<int> idle;
  for (int i = 0; i < 150; ++i) {
    const int fd = connect_nonblocking(port);  // the kernel completes them; the daemon cannot take them all
    ASSERT_GE(fd, 0) << std::strerror(errno);
    idle.push_back(fd);
  }
  ASSERT_TRUE(wait_until([&] { return d.output().find("accept failed") != std::string::npos; }, 10s))
      << "the daemon ran out of descriptors: " << d.output();
  // Out of descriptors, retrying every 50 ms: ~20 failures a second, logged
  // a line a second (each saying how many it stands for), not a line each.
  // Waited for: a line that stands for more than one failure (a line each
  // would never say so); it comes a second after the first.
  std::string log;
  std::vector<accept_failure_line> lines;
  ASSERT_TRUE(wait_until(
      [&] {
        log = d.output();
        lines = accept_failure_lines(log);
        return std::any_of(lines.begin(), lines.end(), [](const auto& l) { return l.failures > 1; });
      },
      20s))
      << "no line stood for several failures: " << log;
  EXPECT_GE(lines.size(), 2u);
  EXPECT_LE(lines.size(), 4u) << log;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const long apart = (lines[i].ms_of_day - lines[i - 1].ms_of_day + 86'400'000) % 86'400'000;
    EXPECT_GE(apart, 900) << "a line a second at most:\n" << log;
  }
  for (const int fd : idle) ::close(fd);  // the idle connections go: the descriptors come back
  reply r;
  ASSERT_TRUE(wait_until(
      [&] {
        r = post(port, "/v1/jobs/echo", "back", {}, 2s);
        return r.ok && r.status == 200u;
      },
      20s))
      << r.error << "\n"
      << d.output();
  EXPECT_EQ(r.body, "back");
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(10s), 0) << d.output();
}

// ---- oversize, malformed and smuggling shapes ------------------------------------------

struct bad_request_case {
  const char* what;
  std::string bytes;
  unsigned status;
};

TEST(HostileClients, MalformedOversizeAndSmugglingShapesAreRefusedAndEnqueueNothing) {
  using namespace std::string_literals;  // "garbage" holds NUL bytes
  const std::string post_echo = "POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\n";
  const std::vector<bad_request_case> cases = {
      {"headers over 8 KiB", post_echo + "X-Pad: " + std::string(9000, 'p') + "\r\nContent-Length: 1\r\n\r\nx", 431},
      {"a target over 8 KiB", "GET /" + std::string(9000, 't') + " HTTP/1.1\r\nHost: localhost\r\n\r\n", 431},
      {"Content-Length over --max-body", post_echo + "Content-Length: 2000000\r\n\r\n", 413},
      {"a chunked body over --max-body",
       post_echo + "Transfer-Encoding: chunked\r\n\r\n100000\r\n" + std::string(0x100000, 'c') + "\r\n0\r\n\r\n", 413},
      {"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n"s, 400},
      {"a bad chunk size", post_echo + "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400},
      {"a chunk size that overflows",
       post_echo + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\nabc\r\n0\r\n\r\n", 400},
      {"Content-Length and Transfer-Encoding",
       post_echo + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"Transfer-Encoding and Content-Length",
       post_echo + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n", 400},
      {"two different Content-Lengths", post_echo + "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
      {"two equal Content-Lengths", post_echo + "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400},
      {"a Content-Length list", post_echo + "Content-Length: 3, 3\r\n\r\nabc", 400},
      {"a negative Content-Length", post_echo + "Content-Length: -1\r\n\r\n", 400},
      {"a Content-Length that overflows", post_echo + "Content-Length: 99999999999999999999999\r\n\r\n", 400},
      {"chunked not last", post_echo + "Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", 400},
      {"chunked not last, over two fields",
       post_echo + "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n0\r\n\r\n", 400},
      {"no chunked at all", post_echo + "Transfer-Encoding: identity\r\n\r\nabc", 400},
      {"a coding before chunked", post_echo + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},
      {"a space before the colon", post_echo + "Content-Length : 3\r\n\r\nabc", 400},
      {"a space in a field name", post_echo + "Bad Name: x\r\nContent-Length: 3\r\n\r\nabc", 400},
      {"a NUL in a field value", post_echo + std::string("X-A: a\0b\r\nContent-Length: 3\r\n\r\nabc", 34), 400},
      {"bare LF line ends", "POST /v1/jobs/echo HTTP/1.1\nHost: t\nContent-Length: 3\n\nabc", 400},
      {"a bad HTTP version", "POST /v1/jobs/echo HTTP/9.9x\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc", 400},
  };
  server_options o = test_options();
  o.max_body = 1000;
  test_server srv(o);
  for (const bad_request_case& c : cases) {
    raw_socket s(srv.port());
    s.send(c.bytes);  // may fail part-way: the server can refuse before it has read it all
    const auto [resp, closed] = s.read_until_close(5s);
    const std::string want = "HTTP/1.1 " + std::to_string(c.status) + " ";
    EXPECT_EQ(resp.rfind(want, 0), 0u) << c.what << ": " << resp.substr(0, 200);
    EXPECT_TRUE(closed) << c.what << ": the connection is not trusted with another request";
  }
  EXPECT_EQ(admitted_total(srv), 0u) << "a refused request enqueues nothing";
  const handler_snapshot echo = srv.handler("echo");
  EXPECT_EQ(echo.admitted + echo.rejected_invalid_timeout + echo.finished_ok, 0u);
  EXPECT_EQ(post(srv.port(), "/v1/jobs/echo", "fine").status, 200u) << "and the server is still well";
}

}  // namespace
}  // namespace hourglass::server::testing
