// Fleet mode's embedding API from the installed package (hourglass::fleet,
// hiredis found through the package's own config): the clock rule, offline.
#include <hourglass/fleet/freshness.hpp>
#include <hourglass/fleet/job_queue.hpp>

#include <cstdio>

int main() {
  using namespace std::chrono_literals;
  const auto entry = hourglass::fleet::parse_stream_id("1000000-0");  // added at broker time 1000.0 s
  if (!entry) return 1;
  const hourglass::fleet::job_age age = hourglass::fleet::age_on_broker(*entry, 1'003'200'000);  // TIME 1003.2 s
  std::printf("waited %lld ms; job id %s\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(age.waited).count()),
              hourglass::fleet::new_job_id().c_str());
  return age.waited == 3200ms && hourglass::fleet::new_job_id().size() == 32 ? 0 : 1;
}
