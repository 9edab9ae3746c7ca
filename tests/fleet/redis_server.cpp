#include "redis_server.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace hourglass::fleet::testing {

namespace net = boost::asio;
using tcp = net::ip::tcp;

std::uint16_t free_port() {
  net::io_context io;
  tcp::acceptor a(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

std::vector<std::string> skewed_redis_clock(const std::string& skew) {
  if (skew.empty()) return {};
  return {"/usr/bin/env",
          "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0 "
          "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
          "FAKETIME=" + skew, "FAKETIME_DONT_FAKE_MONOTONIC=1"};
}

redis_server::redis_server(std::vector<std::string> extra, std::vector<std::string> prefix)
    : extra_(std::move(extra)), prefix_(std::move(prefix)) {
  char tmpl[] = "/tmp/hourglass-redis-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  // A free port is free when asked, not when redis-server binds it: another
  // test's connection may take it first (an outgoing socket's ephemeral
  // port), the likelier the more tests run at once. Then new ports, its
  // cluster bus's too, and a clean directory, a few times.
  for (int attempt = 1;; ++attempt) {
    port_ = free_port();
    for (std::size_t i = 0; i + 1 < extra_.size(); ++i) {
      if (extra_[i] == "--cluster-port") extra_[i + 1] = std::to_string(free_port());
    }
    try {
      spawn();
      return;
    } catch (const std::runtime_error&) {
      if (attempt == 5 || log().find("Address already in use") == std::string::npos) throw;
      for (const auto& f : std::filesystem::directory_iterator(dir_)) std::filesystem::remove_all(f.path());
    }
  }
}

redis_server::~redis_server() {
  if (pid_ > 0) {
    ::kill(pid_, SIGCONT);
    kill9();
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void redis_server::spawn() {
  std::vector<std::string> args{
      "redis-server", "--port",    std::to_string(port_), "--bind", "127.0.0.1", "--dir", dir_,
      "--appendonly", "yes",       "--appendfsync",       "always", "--save",    "",      "--daemonize",
      "no",           "--logfile", dir_ + "/redis.log"};
  args.insert(args.end(), extra_.begin(), extra_.end());
  args.insert(args.begin(), prefix_.begin(), prefix_.end());
  try {
    // Its own output goes to a file, never the test's: a test process that
    // dies without killing it (a sanitizer's halt) must not leave ctest
    // waiting on a pipe a live redis-server still holds.
    pid_ = test_common::spawn_process(args, dir_ + "/redis.out", "redis-server (tools/install-deps installs it)");
  } catch (...) {
    pid_ = -1;
    throw;
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!answers_ping()) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server exited at start:\n" + log());
    }
    if (std::chrono::steady_clock::now() > give_up) throw std::runtime_error("redis-server did not answer PING");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool redis_server::answers_ping() const {
  try {
    net::io_context io;
    tcp::socket s(io);
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_));
    net::write(s, net::buffer(std::string_view("PING\r\n")));
    std::string line;
    net::read_until(s, net::dynamic_buffer(line), "\r\n");
    // A server that needs AUTH answers -NOAUTH: it is up all the same.
    return line.rfind("+PONG", 0) == 0 || line.rfind("-NOAUTH", 0) == 0;
  } catch (const std::exception&) {
    return false;
  }
}

void redis_server::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
  pid_ = -1;
}

void redis_server::restart() {
  kill9();
  spawn();
}

void redis_server::pause() { ::kill(pid_, SIGSTOP); }
void redis_server::resume() { ::kill(pid_, SIGCONT); }

std::string redis_server::log() const {
  std::stringstream ss;
  for (const char* name : {"/redis.log", "/redis.out"}) {
    std::ifstream in(dir_ + name);
    if (in.peek() != std::ifstream::traits_type::eof()) ss << in.rdbuf();
  }
  return ss.str();
}

}  // namespace hourglass::fleet::testing
