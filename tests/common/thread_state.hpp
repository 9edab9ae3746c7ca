// Whether another thread of this process is asleep in the kernel (state S:
// blocked in a wait), as /proc tells: tests wait for "it is blocked" instead
// of sleeping and hoping. Elsewhere than Linux nobody can tell: every thread
// counts as asleep.
#pragma once

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#endif

namespace hourglass::testing {

#ifdef __linux__
inline long this_thread_id() { return ::syscall(SYS_gettid); }
inline bool thread_sleeps(long tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(')');  // the state follows the command name: "tid (name) S ..."
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'S';
}
#else
inline long this_thread_id() { return 0; }
inline bool thread_sleeps(long) { return true; }
#endif

}  // namespace hourglass::testing
