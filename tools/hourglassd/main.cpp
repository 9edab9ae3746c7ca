// hourglassd: a thin main over the hourglass::server library.
// Exit codes: 0 after a drain (SIGTERM/SIGINT) or --help, 1 when it cannot
// start (address in use, unreadable token file), 2 for a bad command line.
#include <csignal>
#include <exception>
#include <iostream>

#include <pthread.h>

#include "hourglass/server/config.hpp"
#include "hourglass/server/http_server.hpp"

int main(int argc, char** argv) {
  const auto parsed = hourglass::server::parse_command_line(argc, argv, std::cout, std::cerr);
  if (!parsed.options) return parsed.exit_code;

  // Block the drain signals in every thread (the server's threads inherit the
  // mask) and take them synchronously here.
  sigset_t drain_signals;
  sigemptyset(&drain_signals);
  sigaddset(&drain_signals, SIGTERM);
  sigaddset(&drain_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &drain_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  try {
    hourglass::server::http_server server(*parsed.options);
    server.start();
    int sig = 0;
    sigwait(&drain_signals, &sig);
    server.drain();
  } catch (const std::exception& e) {
    std::cerr << "hourglassd: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
