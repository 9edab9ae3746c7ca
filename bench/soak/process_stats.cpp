#include "soak/process_stats.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <unordered_set>

namespace hourglass::bench {

namespace {

// Calls `each(name)` for every entry of a directory but . and ..; false if it cannot be opened.
template <class Each>
bool for_each_entry(const std::string& path, Each each) {
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return false;
  while (const dirent* e = readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) each(e->d_name);
  }
  closedir(dir);
  return true;
}

// "socket:[12345]" -> 12345.
std::optional<std::uint64_t> socket_inode(const std::string& link) {
  unsigned long long inode = 0;
  if (std::sscanf(link.c_str(), "socket:[%llu]", &inode) != 1) return std::nullopt;
  return inode;
}

std::uint16_t port_of(const std::string& address) {
  const auto colon = address.rfind(':');
  return colon == std::string::npos ? 0
                                    : static_cast<std::uint16_t>(std::stoul(address.substr(colon + 1), nullptr, 16));
}

// Counts our established sockets to `port` in a /proc/self/net/tcp{,6} table, whose
// lines are "sl local_address rem_address st ... inode ...", addresses as HEXIP:HEXPORT.
void count_sockets_to_port(const char* table, std::uint16_t port, const std::unordered_set<std::uint64_t>& ours,
                           std::uint64_t& count) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    std::uint64_t inode = 0;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode))
      continue;
    // Only ESTABLISHED (01): in CLOSE_WAIT the daemon has closed its end already.
    if (state == "01" && port_of(remote) == port && ours.count(inode) != 0) ++count;
  }
}

}  // namespace

std::optional<tcp_socket_state> find_tcp_socket(std::uint16_t local_port, std::uint16_t remote_port) {
  std::optional<tcp_socket_state> found;  // an ESTABLISHED one wins over an old one of the same ports
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues;
      if (!(fields >> slot >> local >> remote >> state >> queues)) continue;
      if (port_of(local) != local_port || port_of(remote) != remote_port) continue;
      tcp_socket_state s;
      s.state = static_cast<int>(std::stoul(state, nullptr, 16));
      s.send_queue = std::stoull(queues.substr(0, queues.find(':')), nullptr, 16);
      if (!found || s.state == 1) found = s;
    }
  }
  return found;
}

double machine_load_average() {
  std::ifstream in("/proc/loadavg");
  double one_minute = 0;
  if (in >> one_minute) return one_minute;
  return std::numeric_limits<double>::quiet_NaN();
}

std::optional<process_stats> read_process_stats(int pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  std::ifstream status(base + "/status");
  if (!status) return std::nullopt;
  process_stats s;
  bool have_rss = false, have_threads = false;
  std::string line;
  while (std::getline(status, line)) {
    unsigned long long v = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %llu kB", &v) == 1) s.rss_kib = v, have_rss = true;
    if (std::sscanf(line.c_str(), "Threads: %llu", &v) == 1) s.threads = v, have_threads = true;
  }
  // A zombie has a status file without VmRSS: it is gone as far as the soak is concerned.
  if (!have_rss || !have_threads) return std::nullopt;
  if (!for_each_entry(base + "/fd", [&](const char*) { ++s.fds; })) return std::nullopt;
  return s;
}

std::uint64_t own_connections_to_port(std::uint16_t port) {
  std::unordered_set<std::uint64_t> ours;
  for_each_entry("/proc/self/fd", [&](const char* name) {
    char link[128];
    const std::string path = std::string("/proc/self/fd/") + name;
    const ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
    if (n <= 0) return;
    link[n] = '\0';
    if (const auto inode = socket_inode(link)) ours.insert(*inode);
  });
  std::uint64_t count = 0;
  count_sockets_to_port("/proc/self/net/tcp", port, ours, count);
  count_sockets_to_port("/proc/self/net/tcp6", port, ours, count);
  return count;
}

}  // namespace hourglass::bench
