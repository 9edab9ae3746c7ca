// What the soak reads about a process from Linux's /proc, once a second.
#pragma once

#include <cstdint>
#include <optional>

namespace hourglass::bench {

struct process_stats {
  std::uint64_t rss_kib = 0;  // /proc/PID/status VmRSS
  std::uint64_t threads = 0;  // /proc/PID/status Threads
  std::uint64_t fds = 0;      // entries of /proc/PID/fd
};

// nullopt once the process is gone (or was never ours to read).
std::optional<process_stats> read_process_stats(int pid);

// The machine's load average over the last minute (/proc/loadavg); NaN if unreadable.
double machine_load_average();

// TCP sockets this process holds open (in /proc/self/fd) whose remote port
// is `port`: the connections the soak itself has to the daemon, so a
// growing fd count can be told apart from a growing load.
std::uint64_t own_connections_to_port(std::uint16_t port);

// A TCP socket of this host as /proc/net/tcp{,6} shows it, whichever process owns it.
struct tcp_socket_state {
  int state = 0;                 // 1 ESTABLISHED, 4 FIN_WAIT1, 6 TIME_WAIT, ... (include/net/tcp_states.h)
  std::uint64_t send_queue = 0;  // bytes written and not yet acknowledged by the peer
};
// The socket with local port `local_port` connected to remote port `remote_port`.
std::optional<tcp_socket_state> find_tcp_socket(std::uint16_t local_port, std::uint16_t remote_port);

}  // namespace hourglass::bench
