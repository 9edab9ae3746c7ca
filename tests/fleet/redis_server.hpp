// A real redis-server for the fleet's tests: on a free loopback port, in a
// temporary directory, durable (appendonly yes, appendfsync always), killed
// and its directory removed at the end. Installed by tools/install-deps; a
// missing redis-server fails the test, it is never skipped.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/process.hpp"
#include "hourglass/fleet/redis.hpp"

namespace hourglass::fleet::testing {

class redis_server {
 public:
  // Starts it and waits until it answers PING. `extra` are more redis-server
  // arguments ("--requirepass", "pw"); `prefix` runs before it (a wrapper:
  // skewed_redis_clock). Throws std::runtime_error.
  explicit redis_server(std::vector<std::string> extra = {}, std::vector<std::string> prefix = {});
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  redis_endpoint endpoint() const { return {"127.0.0.1", port_, 0, ""}; }

  void kill9();    // SIGKILL, and reap it
  void restart();  // start again on the same port and directory (after kill9)
  void pause();    // SIGSTOP: a broker that accepts and never answers
  void resume();   // SIGCONT
  std::string log() const;

 private:
  void spawn();
  bool answers_ping() const;

  std::vector<std::string> extra_;
  std::vector<std::string> prefix_;
  std::string dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

using test_common::io_thread;

// The redis_server prefix that runs it with its wall clock `skew` off
// ("-5m"; "" none), its monotonic clock untouched. libfaketime is preloaded
// by env, which execs (the pid stays redis-server's). Debian's redis-server
// 7.0 aborts under libfaketime alone ("Unexpected recursive calls to
// clock_gettime()"): glibc's malloc debug library preloaded ahead of it
// avoids the recursion.
std::vector<std::string> skewed_redis_clock(const std::string& skew);

// A loopback port nothing listens on right now.
std::uint16_t free_port();

}  // namespace hourglass::fleet::testing
