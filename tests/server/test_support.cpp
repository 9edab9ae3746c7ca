#include "test_support.hpp"

#include <gtest/gtest.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/verb.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "common/eventually.hpp"
#include "common/process.hpp"
#include "hourglass/support/json.hpp"

namespace hourglass::server::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

bool client::connect(std::chrono::milliseconds limit, std::string& error) {
  stream_ = std::make_unique<beast::tcp_stream>(io_);
  buffer_.clear();
  boost::system::error_code result;
  stream_->expires_after(limit);
  stream_->async_connect(tcp::endpoint(net::ip::make_address(host_), port_),
                         [&](boost::system::error_code ec) { result = ec; });
  io_.restart();
  io_.run();
  if (result) {
    error = "connect: " + result.message();
    stream_.reset();
    return false;
  }
  return true;
}

void client::close() {
  if (!stream_) return;
  boost::system::error_code ignored;
  stream_->socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_->close();
  stream_.reset();
  io_.restart();
  io_.run();  // let aborted handlers finish
}

reply client::request(const std::string& method, const std::string& target, const std::string& body, const headers& hs,
                      std::chrono::milliseconds limit) {
  reply r;
  const auto t0 = std::chrono::steady_clock::now();
  if (!stream_ && !connect(limit, r.error)) return r;
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, host_ + ":" + std::to_string(port_));
  for (const auto& [k, v] : hs) req.insert(k, v);
  req.body() = body;
  if (!body.empty() || method == "POST") req.prepare_payload();
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  parser.skip(req.method() == http::verb::head);  // a HEAD answer has no body
  boost::system::error_code result;
  stream_->expires_after(limit);
  http::async_write(*stream_, req, [&](boost::system::error_code ec, std::size_t) {
    if (ec) {
      result = ec;
      return;
    }
    http::async_read(*stream_, buffer_, parser, [&](boost::system::error_code e, std::size_t) { result = e; });
  });
  io_.restart();
  io_.run();
  r.elapsed = std::chrono::steady_clock::now() - t0;
  if (result) {
    r.error = result.message();
    close();
    return r;
  }
  auto res = parser.release();
  r.ok = true;
  r.status = res.result_int();
  for (const auto& f : res) {
    std::string name(f.name_string());
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    r.fields[name] = std::string(f.value());
  }
  r.body = std::move(res.body());
  if (!res.keep_alive()) close();
  return r;
}

raw_socket::raw_socket(std::uint16_t port, int receive_buffer) : socket_(io_) {
  socket_.open(tcp::v4());
  if (receive_buffer > 0) socket_.set_option(net::socket_base::receive_buffer_size(receive_buffer));
  socket_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
}

raw_socket::~raw_socket() { close(); }

bool raw_socket::send(const std::string& bytes) {
  boost::system::error_code ec;
  net::write(socket_, net::buffer(bytes), ec);
  return !ec;
}

std::pair<std::string, bool> raw_socket::read_until_close(std::chrono::milliseconds limit) {
  std::string out;
  bool closed = false;
  bool timed_out = false;
  std::array<char, 4096> buf{};
  std::function<void()> more = [&] {
    socket_.async_read_some(net::buffer(buf), [&](boost::system::error_code ec, std::size_t n) {
      out.append(buf.data(), n);
      if (ec) {
        if (!timed_out) closed = true;
        return;
      }
      more();
    });
  };
  more();
  io_.restart();
  io_.run_for(limit);
  if (!closed) {
    timed_out = true;
    boost::system::error_code ignored;
    socket_.cancel(ignored);
    io_.restart();
    io_.run();
  }
  return {out, closed};
}

std::string raw_socket::read_until(const std::string& needle, std::chrono::milliseconds limit) {
  std::string out;
  bool stop = false;
  std::array<char, 4096> buf{};
  std::function<void()> more = [&] {
    socket_.async_read_some(net::buffer(buf), [&](boost::system::error_code ec, std::size_t n) {
      out.append(buf.data(), n);
      if (ec || stop || out.find(needle) != std::string::npos) return;
      more();
    });
  };
  more();
  io_.restart();
  io_.run_for(limit);
  stop = true;
  boost::system::error_code ignored;
  socket_.cancel(ignored);
  io_.restart();
  io_.run();
  return out;
}

void raw_socket::close() {
  boost::system::error_code ignored;
  if (socket_.is_open()) {
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  return test_common::eventually(pred, limit);
}

server_options test_options() {
  server_options o;
  o.listen = "127.0.0.1:0";
  o.workers = 4;
  // 2: sessions on strands. HOURGLASS_TEST_IO_THREADS=1 runs them on the
  // lone I/O thread without strands instead (core::connection_executor).
  const char* io = std::getenv("HOURGLASS_TEST_IO_THREADS");
  o.io_threads = io != nullptr ? std::strtoul(io, nullptr, 10) : 2;
  const char* level = std::getenv("HOURGLASS_TEST_LOG");
  o.log_level = level != nullptr ? level : "error";
  // Tests scrape /metrics right after acting and expect what they did; the
  // cache's own tests (http_server_metrics_test.cpp) set an interval.
  o.metrics_cache = duration::zero();
  return o;
}

test_server::test_server(server_options o, const std::function<void(http_server&)>& setup, hourglass::clock& clk)
    : server_(std::make_unique<http_server>(std::move(o), clk)) {
  if (setup) setup(*server_);
  server_->start();
}

test_server::~test_server() = default;

handler_snapshot test_server::handler(const std::string& name) {
  const auto snap = metrics();
  const handler_snapshot* h = snap.find(name);
  return h != nullptr ? *h : handler_snapshot{};
}

handler_fn report_handler() {
  return [](const context& ctx, const request_view& req) {
    const auto rem = ctx.remaining();
    support::json_writer j;
    j.begin_object();
    j.member("budget_ms", req.budget == duration::max() ? -1.0 : to_millis(req.budget));
    j.member("remaining_ms", rem == duration::max() ? -1.0 : to_millis(rem));
    j.member("request_timeout", req.header("Request-Timeout")).member("traceparent", req.traceparent);
    j.member("remote", req.remote).member("body", req.body.substr(0, 64));
    return handler_result{j.end_object().take(), "application/json"};
  };
}

double json_number(const std::string& json, const std::string& key) {
  return support::number_member(json, key).value_or(std::nan(""));
}

double metric_value(const std::string& metrics, const std::string& name) {
  const std::string text = "\n" + metrics;
  const auto at = text.find("\n" + name + " ");
  return at == std::string::npos ? std::nan("") : std::atof(text.c_str() + at + name.size() + 2);
}

std::string json_string(const std::string& json, const std::string& key) {
  return support::string_member(json, key).value_or("");
}

boost::json::value job_object(std::uint16_t port, const std::string& id) {
  const auto doc = support::parse_json(get(port, "/v1/jobs/" + id).body);
  return doc ? *doc : boost::json::value();
}

std::string job_state(std::uint16_t port, const std::string& id) {
  const boost::json::value j = job_object(port, id);
  return j.is_object() && j.as_object().contains("state") ? std::string(j.at("state").as_string()) : "";
}

daemon_process::daemon_process(const std::vector<std::string>& args, const std::vector<std::string>& prefix) {
  char path[] = "/tmp/hourglassd-test-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  log_path_ = path;
  std::vector<std::string> all(prefix);
  all.emplace_back(HOURGLASSD_PATH);
  all.insert(all.end(), args.begin(), args.end());
  pid_ = test_common::spawn_process(all, log_path_, "hourglassd");
}

daemon_process::~daemon_process() {
  if (!exit_code_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  ::unlink(log_path_.c_str());
}

std::string daemon_process::output() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::uint16_t daemon_process::wait_for_port(std::chrono::milliseconds limit) {
  std::uint16_t port = 0;
  wait_until(
      [&] {
        const std::string out = output();
        const std::string marker = "listening on 127.0.0.1:";
        const auto pos = out.find(marker);
        if (pos == std::string::npos) return exit_code_.has_value() || wait_exit(0ms).has_value();
        port = static_cast<std::uint16_t>(std::atoi(out.c_str() + pos + marker.size()));
        return true;
      },
      limit);
  return port;
}

void daemon_process::signal(int sig) {
  if (!exit_code_) ::kill(pid_, sig);
}

std::optional<int> daemon_process::wait_exit(std::chrono::milliseconds limit) {
  if (exit_code_) return exit_code_;
  wait_until(
      [&] {
        int st = 0;
        const int r = ::waitpid(pid_, &st, WNOHANG);
        if (r == pid_) exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return exit_code_.has_value();
      },
      limit);
  return exit_code_;
}

std::vector<std::string> skewed_clock(const std::string& skew) {
  if (skew.empty()) return {};
  const char* asan = std::getenv("ASAN_OPTIONS");
  return {"/usr/bin/env", "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1", "FAKETIME=" + skew,
          "FAKETIME_DONT_FAKE_MONOTONIC=1",
          "ASAN_OPTIONS=" + std::string(asan != nullptr ? asan : "") +
              ":verify_asan_link_order=0:allocator_release_to_os_interval_ms=-1"};
}

int replace_all(std::string& text, const std::string& from, const std::string& to) {
  int n = 0;
  for (auto pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
    ++n;
  }
  return n;
}

std::string doc_block(const std::string& file, const std::string& marker) {
  std::ifstream in(std::string(HOURGLASS_SOURCE_DIR) + "/" + file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const auto at = doc.find(marker);
  const auto start = at == std::string::npos ? at : doc.find("```sh\n", at);
  if (start == std::string::npos) {
    ADD_FAILURE() << file << " lost its block after " << marker;
    return {};
  }
  const auto end = doc.find("```", start + 6);
  return doc.substr(start + 6, end - start - 6);
}

std::pair<std::string, int> run_script(const std::string& script, int timeout_s, const std::string& kill) {
  char tmpl[] = "/tmp/hourglassd-doc-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) return {"mkstemp failed", -1};
  ::close(fd);
  std::ofstream(tmpl) << "trap '" << kill << " $(jobs -p) 2>/dev/null || true' EXIT\n" << script;
  auto result = run_command("timeout " + std::to_string(timeout_s) + " bash -e " + tmpl + " 2>&1");
  std::remove(tmpl);
  return result;
}

std::string wait_state(std::uint16_t port, const std::string& id, const std::string& want,
                       std::chrono::milliseconds limit) {
  std::string last;
  wait_until(
      [&] {
        last = get(port, "/v1/jobs/" + id).body;
        return json_string(last, "state") == want;
      },
      limit);
  return last;
}

std::vector<std::string> freshness_decisions(std::uint16_t port, int blockers) {
  const auto async = [&](const std::string& body, const std::string& freshness) {
    headers hs{{"Prefer", "respond-async"}};
    if (!freshness.empty()) hs.emplace_back("Job-Freshness", freshness);
    const reply r = post(port, "/v1/jobs/sleep", body, hs);
    EXPECT_EQ(r.status, 202u) << r.body;
    return json_string(r.body, "id");
  };
  std::vector<std::string> ids;
  for (int i = 0; i < blockers; ++i) ids.push_back(async(R"({"ms": 1500})", ""));
  for (const std::string& blocker : ids) {
    EXPECT_TRUE(wait_until([&] { return json_string(get(port, "/v1/jobs/" + blocker).body, "state") == "running"; }));
  }
  ids.push_back(async(R"({"ms": 1})", "500m"));  // stale
  ids.push_back(async(R"({"ms": 1})", "10S"));   // fresh
  std::vector<std::string> out;
  for (const std::string& id : ids) {
    std::string body;
    EXPECT_TRUE(wait_until(
        [&] {
          body = get(port, "/v1/jobs/" + id).body;
          const std::string s = json_string(body, "state");
          return s != "queued" && s != "running" && !s.empty();
        },
        20s));
    out.push_back(json_string(body, "state") + "/" + json_string(body, "stage"));
  }
  return out;
}

std::pair<std::string, int> run_command(const std::string& command) {
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return {"", -1};
  std::string out;
  std::array<char, 4096> buf{};
  while (const std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int st = ::pclose(p);
  return {out, WIFEXITED(st) ? WEXITSTATUS(st) : -1};
}

reply pending_reply::get() {
  EXPECT_EQ(f.wait_for(10s), std::future_status::ready) << "no answer";
  return f.get();
}

pending_reply post_async(client& c, std::string target, std::string body, headers hs) {
  return {std::async(std::launch::async, [&c, target = std::move(target), body = std::move(body), hs = std::move(hs)] {
    return c.post(target, body, hs);
  })};
}

reply answered_exactly_after(manual_clock& clk, pending_reply& r, duration at) {
  clk.advance(at - 1ms);
  EXPECT_FALSE(r.ready_within(50ms)) << "answered before " << to_millis(at) << " ms";
  clk.advance(1ms);
  return r.get();
}

token_file::token_file(const std::string& token) {
  char tmpl[] = "/tmp/hourglass-token-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) throw std::runtime_error("mkstemp");
  ::close(fd);
  path_ = tmpl;
  std::ofstream(path_) << token << "\n";
}

token_file::~token_file() { std::remove(path_.c_str()); }

}  // namespace hourglass::server::testing
