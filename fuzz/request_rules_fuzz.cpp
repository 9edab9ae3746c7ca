// The daemon's pure request rules on bytes from outside: the route of a
// request target, the Host check against DNS rebinding, the retry and delay
// headers of an async job, and a listing's query (its cursor, state, limit).
// Input: a method byte, then four '\n'-separated fields: target, Host,
// Job-Attempts / Job-Backoff / Job-Deadline (split by '|'), and Job-Delay.
// Properties: nothing throws or reads out of bounds; a route's name and item
// are views into the target; a Host with userinfo, a path or a space inside
// is never allowed; an accepted retry policy is one validate() accepts, with
// its cap within the backoff bound; an accepted delay is within --max-delay;
// an accepted listing's limit is 1 to 1,000.
#include <boost/beast/http/fields.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fuzz_check.hpp"
#include "http/job_listing.hpp"
#include "http/request_rules.hpp"

namespace {

namespace http = boost::beast::http;
using namespace hourglass::server::detail;

bool within(std::string_view inner, std::string_view outer) {
  return inner.empty() || (inner.data() >= outer.data() && inner.data() + inner.size() <= outer.data() + outer.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  constexpr http::verb methods[] = {http::verb::get, http::verb::post, http::verb::delete_, http::verb::head,
                                    http::verb::put};
  const http::verb method = methods[data[0] % 5];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string_view> f;
  for (int i = 0; i < 4; ++i) {
    const auto nl = rest.find('\n');
    f.push_back(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  const std::string target(f[0]);
  const route r = route_request(method, target);
  FUZZ_CHECK(within(r.name, target) && within(r.item, target));

  const std::vector<std::string> allowed{"hourglass.internal", ".jobs.example"};
  if (host_allowed(f[1], allowed)) {
    const std::string_view h = f[1];
    const auto first = h.find_first_not_of(" \t");  // a field's own surrounding whitespace
    const auto last = h.find_last_not_of(" \t");
    const std::string_view inner = first == std::string_view::npos ? std::string_view()
                                                                   : h.substr(first, last - first + 1);
    FUZZ_CHECK(inner.find_first_of("@/ \t?#") == std::string_view::npos);
  }

  http::fields headers;
  std::string_view retry = f[2];
  const char* names[] = {"Job-Attempts", "Job-Backoff", "Job-Deadline"};
  for (const char* name : names) {
    const auto bar = retry.find('|');
    const std::string_view value = retry.substr(0, bar);
    if (!value.empty()) headers.insert(name, value);
    if (bar == std::string_view::npos) break;
    retry.remove_prefix(bar + 1);
  }
  if (!f[3].empty()) headers.insert("Job-Delay", f[3]);
  const hourglass::duration max_delay = std::chrono::hours(24 * 30);
  const job_retry_reading rr = read_job_retry(headers, hourglass::job_retry_policy{}, max_delay);
  if (rr.ok) {
    hourglass::validate(rr.policy);  // throws, and fails the input, on a policy that cannot mean what it says
    FUZZ_CHECK(rr.policy.cap <= max_delay);
  } else {
    FUZZ_CHECK(!rr.error.empty() && !rr.message.empty());
  }
  const auto wall_now = hourglass::support::wall_time{std::chrono::seconds(1'800'000'000)};
  const job_delay_reading d = read_job_delay(headers, max_delay, wall_now);
  if (d.ok) {
    FUZZ_CHECK(d.delay >= hourglass::duration::zero() && d.delay <= max_delay);
    if (d.not_before) FUZZ_CHECK(*d.not_before - wall_now <= max_delay);
  }

  const auto q = read_list_query(target);
  if (const auto* ok = std::get_if<list_request>(&q)) FUZZ_CHECK(ok->limit >= 1 && ok->limit <= max_list_limit);
  return 0;
}
