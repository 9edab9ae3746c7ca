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
  // arguments ("--requirepass", "pw"). Throws std::runtime_error.
  explicit redis_server(std::vector<std::string> extra = {});
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
  std::string dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

using test_common::io_thread;

// A loopback port nothing listens on right now.
std::uint16_t free_port();

}  // namespace hourglass::fleet::testing
