// The hourglassd program itself: signals, exit codes, a real client (curl).
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <future>
#include <sstream>
#include <unistd.h>
#include <vector>

#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

// --metrics-cache 0s: the tests poll /metrics for the moment their load is
// in, and act on it then (a cached page would have them signal up to 1 s late).
std::vector<std::string> base_args(std::vector<std::string> more = {}) {
  std::vector<std::string> a{"--listen", "127.0.0.1:0", "--workers", "4", "--metrics-cache", "0s"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(Hourglassd, SigtermDuringLoadAnswersEveryRequestAndExitsZero) {
  daemon_process d(base_args({"--drain-timeout", "3s"}));
  const std::uint16_t port = d.wait_for_port();
  ASSERT_NE(port, 0) << d.output();

  constexpr int n = 12;  // 4 workers x 3 rounds of 300 ms: all fit in the drain timeout
  std::vector<std::future<reply>> calls;
  for (int i = 0; i < n; ++i) {
    calls.push_back(std::async(std::launch::async, [port] {
      return post(port, "/v1/jobs/sleep", R"({"ms": 300})", {{"Request-Timeout", "20S"}}, std::chrono::seconds(15));
    }));
  }
  // All admitted (4 running, 8 queued) before the signal.
  ASSERT_TRUE(wait_until([&] {
    return get(port, "/metrics").body.find("hourglass_jobs_admitted_total{handler=\"sleep\"} 12") != std::string::npos;
  })) << d.output();
  d.signal(SIGTERM);
  ASSERT_TRUE(wait_until([&] { return get(port, "/readyz").status == 503u; }, std::chrono::seconds(2)));
  const reply late = post(port, "/v1/jobs/echo", "x");
  EXPECT_EQ(late.status, 503u) << "new jobs are refused while draining";

  int ok = 0;
  for (auto& c : calls) {
    const reply r = c.get();
    ASSERT_TRUE(r.ok) << "a request lost its answer: " << r.error;
    ok += r.status == 200u ? 1 : 0;
  }
  EXPECT_EQ(ok, n) << "every admitted job finished inside the drain timeout";
  const auto code = d.wait_exit(std::chrono::seconds(10));
  ASSERT_TRUE(code.has_value()) << d.output();
  EXPECT_EQ(*code, 0) << d.output();
}

// At full load: hundreds of connections, each waiting on a job, plus idle
// keep-alive ones. Every waiting one gets its answer; the idle ones are
// closed; the exit code is 0.
TEST(Hourglassd, SigtermWithHundredsOfConnectionsAnswersEveryOneAndExitsZero) {
  constexpr int kWaiting = 300;
  constexpr int kIdle = 200;
  daemon_process d(base_args({"--workers", "32", "--drain-timeout", "20s", "--queue-capacity", "1024"}));
  const std::uint16_t port = d.wait_for_port();
  ASSERT_NE(port, 0) << d.output();
  std::vector<std::unique_ptr<client>> idle;
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(std::make_unique<client>(port));
    ASSERT_EQ(idle.back()->get("/healthz").status, 200u);
  }
  std::vector<std::future<reply>> calls;
  for (int i = 0; i < kWaiting; ++i) {
    calls.push_back(std::async(std::launch::async, [port] {
      return post(port, "/v1/jobs/sleep", R"({"ms": 100})", {{"Request-Timeout", "60S"}}, std::chrono::seconds(60));
    }));
  }
  const std::string all_in = "hourglass_jobs_admitted_total{handler=\"sleep\"} " + std::to_string(kWaiting) + "\n";
  ASSERT_TRUE(wait_until([&] { return idle[0]->get("/metrics").body.find(all_in) != std::string::npos; }, 30s))
      << d.output();
  d.signal(SIGTERM);
  int ok = 0;
  for (auto& c : calls) {
    const reply r = c.get();
    ASSERT_TRUE(r.ok) << "a request lost its answer: " << r.error;
    ok += r.status == 200u ? 1 : 0;
  }
  EXPECT_EQ(ok, kWaiting) << "every admitted job finished inside the drain timeout";
  const auto code = d.wait_exit(std::chrono::seconds(30));
  ASSERT_TRUE(code.has_value()) << d.output();
  EXPECT_EQ(*code, 0) << d.output();
  for (auto& c : idle) EXPECT_FALSE(c->get("/healthz", {}, 2s).ok) << "an idle connection outlived the daemon";
}

// kill -9 leaves nothing that stops a new daemon from listening on the same
// port at once (SO_REUSEADDR over the old connections in TIME_WAIT).
TEST(Hourglassd, AfterSigkillARestartOnTheSamePortServesAtOnce) {
  auto d = std::make_unique<daemon_process>(base_args());
  const std::uint16_t port = d->wait_for_port();
  ASSERT_NE(port, 0) << d->output();
  std::vector<std::future<reply>> calls;
  for (int i = 0; i < 50; ++i) {
    calls.push_back(std::async(std::launch::async, [port] {
      return post(port, "/v1/jobs/sleep", R"({"ms": 5000})", {{"Request-Timeout", "20S"}}, std::chrono::seconds(20));
    }));
  }
  ASSERT_TRUE(wait_until([&] {
    return get(port, "/metrics").body.find("hourglass_jobs_admitted_total{handler=\"sleep\"} 50") != std::string::npos;
  }));
  d->signal(SIGKILL);
  d->wait_exit(5s);
  for (auto& c : calls) EXPECT_FALSE(c.get().ok) << "killed with their jobs";
  d = std::make_unique<daemon_process>(
      std::vector<std::string>{"--listen", "127.0.0.1:" + std::to_string(port), "--workers", "4"});
  ASSERT_EQ(d->wait_for_port(), port) << d->output();
  const reply r = post(port, "/v1/jobs/echo", "again");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body, "again");
}

TEST(Hourglassd, SigintCancelsWhatTheDrainTimeoutCannotWaitFor) {
  daemon_process d(base_args({"--drain-timeout", "200ms"}));
  const std::uint16_t port = d.wait_for_port();
  ASSERT_NE(port, 0) << d.output();
  std::vector<std::future<reply>> calls;
  for (int i = 0; i < 6; ++i) {
    calls.push_back(std::async(std::launch::async, [port] {
      return post(port, "/v1/jobs/sleep", R"({"ms": 10000})", {{"Request-Timeout", "30S"}}, std::chrono::seconds(15));
    }));
  }
  ASSERT_TRUE(wait_until([&] {
    return get(port, "/metrics").body.find("hourglass_jobs_admitted_total{handler=\"sleep\"} 6") != std::string::npos;
  }));
  const auto t0 = std::chrono::steady_clock::now();
  d.signal(SIGINT);
  for (auto& c : calls) {
    const reply r = c.get();
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 503u);
    EXPECT_EQ(json_string(r.body, "error"), "cancelled");
    EXPECT_EQ(json_string(r.body, "cause"), "shutdown");
  }
  const auto code = d.wait_exit(std::chrono::seconds(10));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

TEST(Hourglassd, CurlCanDriveIt) {
  daemon_process d(base_args());
  const std::uint16_t port = d.wait_for_port();
  ASSERT_NE(port, 0) << d.output();
  ASSERT_EQ(run_command("command -v curl").second, 0) << "curl is not installed (tools/install-deps installs it)";
  const std::string url = "http://127.0.0.1:" + std::to_string(port);

  auto [echo, rc] = run_command("curl -sS -H 'Request-Timeout: 2S' --data-binary hello " + url + "/v1/jobs/echo");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(echo, "hello");

  auto [headers,
        rc2] = run_command("curl -sS -i -H 'Request-Timeout: 2S' -d '{\"us\": 1000}' " + url + "/v1/jobs/spin");
  EXPECT_EQ(rc2, 0);
  EXPECT_NE(headers.find("HTTP/1.1 200"), std::string::npos) << headers;
  EXPECT_NE(headers.find("Server-Timing: queue;dur="), std::string::npos) << headers;

  auto [code,
        rc3] = run_command("curl -s -o /dev/null -w '%{http_code}' -H 'Request-Timeout: 100m' -d '{\"ms\": 5000}' " +
                           url + "/v1/jobs/sleep");
  EXPECT_EQ(code, "504");

  auto [bad, rc4] = run_command("curl -s -w ' %{http_code}' -H 'Request-Timeout: soon' -d x " + url + "/v1/jobs/echo");
  EXPECT_NE(bad.find("invalid_timeout"), std::string::npos) << bad;
  EXPECT_NE(bad.find(" 400"), std::string::npos) << bad;

  auto [accepted,
        rc5] = run_command("curl -s -i -H 'Prefer: respond-async' -d '{\"ms\": 10}' " + url + "/v1/jobs/sleep");
  EXPECT_NE(accepted.find("HTTP/1.1 202"), std::string::npos) << accepted;
  EXPECT_NE(accepted.find("Location: /v1/jobs/"), std::string::npos) << accepted;

  auto [metrics, rc6] = run_command("curl -sS " + url + "/metrics");
  EXPECT_NE(metrics.find("hourglass_jobs_finished_total{handler=\"echo\",outcome=\"ok\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("hourglass_jobs_rejected_total{handler=\"echo\",reason=\"invalid_timeout\"} 1"),
            std::string::npos);

  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(10)).value_or(-1), 0);
  // One structured line per job, without payloads.
  const std::string log = d.output();
  EXPECT_NE(log.find("job handler=echo mode=sync budget_ms=2000.000"), std::string::npos) << log;
  EXPECT_EQ(log.find("hello"), std::string::npos) << "payloads are never logged";
}

TEST(Hourglassd, ConfigFileAndExitCodes) {
  char tmpl[] = "/tmp/hourglassd-conf-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string path = tmpl;
  std::ofstream(path) << "listen = \"127.0.0.1:0\"\nworkers = 2\ndefault-budget = \"150ms\"\n";
  {
    daemon_process d({"--config", path});
    const std::uint16_t port = d.wait_for_port();
    ASSERT_NE(port, 0) << d.output();
    const reply r = post(port, "/v1/jobs/sleep", R"({"ms": 5000})");
    EXPECT_EQ(r.status, 504u) << "the default budget came from the file";
    EXPECT_LT(r.elapsed_ms(), 1000);
    d.signal(SIGTERM);
    EXPECT_EQ(d.wait_exit(std::chrono::seconds(10)).value_or(-1), 0);
  }
  std::remove(path.c_str());
  {
    daemon_process d({"--listen", "0.0.0.0:0"});  // no token: refused
    EXPECT_EQ(d.wait_exit(std::chrono::seconds(10)).value_or(-1), 2);
    EXPECT_NE(d.output().find("--allow-unauthenticated"), std::string::npos) << d.output();
  }
  {
    daemon_process d({"--help"});
    EXPECT_EQ(d.wait_exit(std::chrono::seconds(10)).value_or(-1), 0);
    EXPECT_NE(d.output().find("--drain-timeout"), std::string::npos);
  }
}

// A loopback port nobody listens on right now (the kernel's pick for port 0).
std::uint16_t free_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

// The ```sh block after `marker` in README.md; empty (and a failure) when it is gone.
std::string readme_block(const std::string& marker) { return doc_block("README.md", marker); }

TEST(Hourglassd, ReadmeExampleRunsAsWritten) {
  std::string script = readme_block("<!-- daemon-example -->");
  ASSERT_FALSE(script.empty());
  ASSERT_EQ(run_command("command -v curl").second, 0) << "curl is not installed (tools/install-deps installs it)";
  // The README's daemons listen on 8080 and 8081; the test moves them to free
  // ports so it runs beside anything else on the machine, and runs the binary
  // under test wherever it was built.
  const std::string first = "127.0.0.1:" + std::to_string(free_port());
  std::string second = first;
  while (second == first) second = "127.0.0.1:" + std::to_string(free_port());
  const std::string binary = "build/release/tools/hourglassd";
  ASSERT_EQ(replace_all(script, binary + " --workers 4", binary + " --listen " + first + " --workers 4"), 1)
      << "the README's first daemon line changed; update this test";
  ASSERT_EQ(replace_all(script, binary, HOURGLASSD_PATH), 2);
  ASSERT_GT(replace_all(script, "127.0.0.1:8080", first), 0);
  ASSERT_GT(replace_all(script, "127.0.0.1:8081", second), 0);
  const auto [out, rc] = run_script(script, 60);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("HTTP/1.1 200 OK"), std::string::npos) << out;
  EXPECT_NE(out.find("Server-Timing: queue;dur="), std::string::npos) << out;
  EXPECT_NE(out.find("\nhello"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("stage": "run")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("stage": "idle")"), std::string::npos) << out;
  // The stream: two chunks, then the idle limit, told in the trailers.
  EXPECT_NE(out.find("chunk 2 of 5\n\r\n0\r\nJob-Outcome: deadline_exceeded; stage=idle\r\nServer-Timing: "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(R"("error": "invalid_timeout")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("stage": "downstream")"), std::string::npos) << out;
  // The DELETE answers 202 cancel_requested while the sleep is still stopping,
  // or 200 cancelled when it stopped first (it wakes at once): either is right.
  EXPECT_TRUE(out.find(R"("cancel_requested": true)") != std::string::npos ||
              out.find(R"("state": "cancelled", "cause": "requested")") != std::string::npos)
      << out;
  EXPECT_NE(out.find("hourglass_jobs_finished_total{handler=\"echo\",outcome=\"ok\"} 1"), std::string::npos) << out;
  EXPECT_NE(out.find("drained"), std::string::npos) << out;
}

// The README's "Run a fleet" block, on free ports, with the binary under test.
TEST(Hourglassd, ReadmeFleetExampleRunsAsWritten) {
  std::string script = readme_block("<!-- fleet-example -->");
  ASSERT_FALSE(script.empty());
  std::vector<std::string> ports;
  while (ports.size() < 4) {
    const std::string p = std::to_string(free_port());
    if (std::find(ports.begin(), ports.end(), p) == ports.end()) ports.push_back(p);
  }
  ASSERT_EQ(replace_all(script, "build/release/tools/hourglassd", HOURGLASSD_PATH), 1);
  ASSERT_EQ(replace_all(script, "build/release/tools/hourglass --url", HOURGLASS_COMMAND_PATH " --url"), 1);
  ASSERT_EQ(replace_all(script, "6390", ports[0]), 3) << "the README's Redis port lines changed";
  for (int i = 0; i < 3; ++i) ASSERT_GT(replace_all(script, std::to_string(8090 + i), ports[i + 1]), 2);
  const auto [out, rc] = run_script(script, 90, "kill -9");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(R"("state": "running")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("state": "ok")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("deliveries": 2)"), std::string::npos) << "finished by another daemon: " << out;
  EXPECT_NE(out.find("default  fleet  running"), std::string::npos) << "the hourglass command's table: " << out;
  EXPECT_NE(out.find("200 text/html"), std::string::npos) << "the dashboard: " << out;
}

TEST(Hourglassd, ReadmeRetryDelayAndScheduleExampleRunsAsWritten) {
  std::string script = readme_block("<!-- schedule-example -->");
  ASSERT_FALSE(script.empty());
  ASSERT_EQ(replace_all(script, "build/release/tools/hourglassd", HOURGLASSD_PATH), 1);
  ASSERT_GT(replace_all(script, "127.0.0.1:8093", "127.0.0.1:" + std::to_string(free_port())), 4)
      << "the README's port lines changed";
  const auto [out, rc] = run_script(script, 60);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(R"("attempt": 3, "attempts_left": 0)"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("error": "upstream_unreachable")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("state": "scheduled")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("result": "hello")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("name": "tick")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("next_fire": ")"), std::string::npos) << out;
  EXPECT_EQ(out.find(R"("enqueued": 0)"), std::string::npos) << "it fired: " << out;
}

}  // namespace
}  // namespace hourglass::server::testing
