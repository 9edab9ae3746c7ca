// Test helpers shared by the test binaries: a child process started with a
// clean signal mask, and an io_context run by one thread.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace hourglass::test_common {

// Starts `args[0]` (searched in PATH) with `args`, its stdout and stderr
// appended to `log_path` when one is given. The test process may block
// signals; the child starts with none blocked, so SIGTERM reaches it.
// Throws std::runtime_error naming `what` when it cannot start.
inline pid_t spawn_process(std::vector<std::string> args, const std::string& log_path, const std::string& what) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("cannot start " + what);
  return pid;
}

// An io_context run by one thread. Declare it before the objects that use
// it: they are destroyed first, and their closing work runs before the thread ends.
struct io_thread {
  io_thread() : work(boost::asio::make_work_guard(io)), t([this] { io.run(); }) {}
  ~io_thread() {
    work.reset();
    t.join();
  }
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work;
  std::thread t;
};

}  // namespace hourglass::test_common
