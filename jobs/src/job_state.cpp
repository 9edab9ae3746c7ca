#include "hourglass/jobs/job_state.hpp"

namespace hourglass::jobs {

std::optional<job_state> parse_job_state(std::string_view name) noexcept {
  for (const job_state s : all_job_states) {
    if (to_string(s) == name) return s;
  }
  return std::nullopt;
}

std::optional<job_filter> parse_job_filter(std::string_view text) noexcept {
  if (text.empty()) return job_filter{};
  if (text == "finished") return job_filter{.k = job_filter::kind::finished};
  if (text == "retrying") return job_filter{.k = job_filter::kind::retrying};
  if (const auto s = parse_job_state(text)) return job_filter{.k = job_filter::kind::one, .state = *s};
  return std::nullopt;
}

}  // namespace hourglass::jobs
