// Helpers for the daemon's tests: an in-process server on an ephemeral
// port, a small blocking HTTP client (Beast) with a bound on every call, a
// raw socket for misbehaving clients, and a spawned hourglassd process.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hourglass/clock.hpp"
#include "hourglass/metrics.hpp"
#include "hourglass/server/http_server.hpp"

namespace hourglass::server::testing {

using namespace std::chrono_literals;
using headers = std::vector<std::pair<std::string, std::string>>;

struct reply {
  bool ok = false;    // a complete response arrived
  std::string error;  // why not
  unsigned status = 0;
  std::map<std::string, std::string> fields;  // lower-case names
  std::string body;
  std::chrono::steady_clock::duration elapsed{};

  std::string header(const std::string& lower_name) const {
    const auto it = fields.find(lower_name);
    return it == fields.end() ? std::string() : it->second;
  }
  double elapsed_ms() const { return std::chrono::duration<double, std::milli>(elapsed).count(); }
};

// One keep-alive connection; every call is bounded by `limit`.
class client {
 public:
  explicit client(std::uint16_t port, std::string host = "127.0.0.1") : port_(port), host_(std::move(host)) {}

  reply request(const std::string& method, const std::string& target, const std::string& body = "",
                const headers& hs = {}, std::chrono::milliseconds limit = 10s);
  reply post(const std::string& target, const std::string& body, const headers& hs = {},
             std::chrono::milliseconds limit = 10s) {
    return request("POST", target, body, hs, limit);
  }
  reply get(const std::string& target, const headers& hs = {}, std::chrono::milliseconds limit = 10s) {
    return request("GET", target, "", hs, limit);
  }
  void close();
  bool connected() const { return stream_ != nullptr; }

 private:
  bool connect(std::chrono::milliseconds limit, std::string& error);

  std::uint16_t port_;
  std::string host_;
  boost::asio::io_context io_;
  std::unique_ptr<boost::beast::tcp_stream> stream_;
  boost::beast::flat_buffer buffer_;
};

// One-shot helpers on a fresh connection.
inline reply post(std::uint16_t port, const std::string& target, const std::string& body, const headers& hs = {},
                  std::chrono::milliseconds limit = 10s) {
  client c(port);
  return c.post(target, body, hs, limit);
}
inline reply get(std::uint16_t port, const std::string& target, const headers& hs = {},
                 std::chrono::milliseconds limit = 10s) {
  client c(port);
  return c.get(target, hs, limit);
}

// A plain socket for clients that misbehave (slow headers, disconnects, raw bytes).
class raw_socket {
 public:
  // receive_buffer > 0: SO_RCVBUF before connecting (a reader the kernel buffers little for).
  explicit raw_socket(std::uint16_t port, int receive_buffer = 0);
  ~raw_socket();
  bool send(const std::string& bytes);
  // Reads until the peer closes or `limit`; returns what arrived and whether the peer closed.
  std::pair<std::string, bool> read_until_close(std::chrono::milliseconds limit);
  // Reads until `needle` arrived, the peer closed, or `limit`.
  std::string read_until(const std::string& needle, std::chrono::milliseconds limit);
  void close();

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
};

// Polls `pred` every few ms until it holds or `limit` passes (waiting for an event, not for a time).
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds limit = 5s);

// Polls GET /v1/jobs/{id} on `port` until its state is `want` or `limit`
// passes; the last body.
std::string wait_state(std::uint16_t port, const std::string& id, const std::string& want,
                       std::chrono::milliseconds limit = 15s);

// Settings for in-process test servers: ephemeral port, quiet logs, /metrics
// never cached (metrics_cache 0).
server_options test_options();

// An in-process daemon on 127.0.0.1:<ephemeral>. Extra handlers are added
// before start(). `clk` (a manual_clock, say) must outlive it.
class test_server {
 public:
  explicit test_server(server_options o = test_options(), const std::function<void(http_server&)>& setup = {},
                       hourglass::clock& clk = real_clock());
  ~test_server();

  std::uint16_t port() const { return server_->port(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }
  http_server& get() { return *server_; }
  handler_snapshot handler(const std::string& name);
  metrics_snapshot metrics() { return server_->jobs().stats().snapshot(); }

 private:
  std::unique_ptr<http_server> server_;
};

// A handler that reports what it was given: {"budget_ms", "remaining_ms", "request_timeout", "traceparent"}.
handler_fn report_handler();
// A number from a flat JSON object ({"key": 12.5, ...}); NaN when absent.
double json_number(const std::string& json, const std::string& key);
std::string json_string(const std::string& json, const std::string& key);
// GET /v1/jobs/{id} on `port`: its job object (null when the answer is no
// JSON), and its state ("" then).
boost::json::value job_object(std::uint16_t port, const std::string& id);
std::string job_state(std::uint16_t port, const std::string& id);
// A sample's value in Prometheus text ("NAME VALUE" on a line of its own); NaN when absent.
double metric_value(const std::string& metrics, const std::string& name);

// A file holding `token` (and a newline), removed with this object: for
// --auth-token-file and --admin-token-file.
class token_file {
 public:
  explicit token_file(const std::string& token);
  ~token_file();
  token_file(const token_file&) = delete;
  token_file& operator=(const token_file&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The real hourglassd binary, spawned with `args`; stderr and stdout go to a file.
class daemon_process {
 public:
  // `prefix` runs before the binary (a wrapper such as faketime).
  explicit daemon_process(const std::vector<std::string>& args, const std::vector<std::string>& prefix = {});
  ~daemon_process();  // SIGKILL if still running
  // Waits for the "listening on ADDR:PORT" log line; 0 if it did not come.
  std::uint16_t wait_for_port(std::chrono::milliseconds limit = 20s);
  void signal(int sig);
  // The exit code, or nullopt if it did not exit within `limit`.
  std::optional<int> wait_exit(std::chrono::milliseconds limit);
  std::string output() const;

 private:
  int pid_ = -1;
  std::string log_path_;
  std::optional<int> exit_code_;
};

// The daemon_process prefix that runs a daemon with its wall clock `skew` off
// ("-10m"), the monotonic clock untouched: our deadlines are on the monotonic
// clock, as they must be. libfaketime is preloaded by env, which execs, so
// the daemon keeps the pid the test kills (the faketime wrapper forks, and
// its child outlived the test). Under AddressSanitizer it comes before the
// ASan runtime: allowed here. And ASan's allocator must not read the clock
// while it fills a size class (it does, to time its release of memory to
// the OS): under faketime that read is the first clock_gettime, whose lazy
// set-up calls dlsym, which mallocs, which re-enters the allocator and
// deadlocks before main (seen in libstdc++'s start-up allocation).
std::vector<std::string> skewed_clock(const std::string& skew);

// What a fleet decides for the same schedule, submitted to `port` (fleet
// daemons of one worker each): `blockers` jobs holding each daemon's worker
// for 1.5 s, then a job fresh for 0.5 s (it must expire in the queue) and
// one fresh for 10 s (it must run). Each job's "state/stage", in that order.
std::vector<std::string> freshness_decisions(std::uint16_t port, int blockers = 1);

// Runs a shell command (test-controlled text only) and returns its stdout and exit status.
std::pair<std::string, int> run_command(const std::string& command);

// Documentation examples run as written (the README's, guards.md's):
// Replaces every `from` in `text`, scanning on after each replacement (the
// replacement may contain `from`). Returns how many were replaced.
int replace_all(std::string& text, const std::string& from, const std::string& to);
// The ```sh block after `marker` in the source tree's `file` (README.md,
// docs/guards.md); empty (and a test failure) when it is gone.
std::string doc_block(const std::string& file, const std::string& marker);
// Runs `script` with bash -e, killing its background jobs at the end (they
// would hold the output pipe open and hang the test); output and exit code.
std::pair<std::string, int> run_script(const std::string& script, int timeout_s, const std::string& kill = "kill");

// ---- manual-clock tests ----------------------------------------------------

// The reply of a request sent from another thread; `ready_within` asserts
// that nothing arrived (a real-time wait for the absence of an answer).
struct pending_reply {
  std::future<reply> f;
  bool ready_within(std::chrono::milliseconds d) { return f.wait_for(d) == std::future_status::ready; }
  reply get();  // waits up to 10 s; a test failure when nothing came
};

pending_reply post_async(client& c, std::string target, std::string body, headers hs = {});

// Moves `clk` to 1 ms before `at` (nothing may be answered yet), then to
// `at`, and returns the answer that came then.
reply answered_exactly_after(manual_clock& clk, pending_reply& r, duration at);

}  // namespace hourglass::server::testing
