// Words the daemon reads the same wherever they come from (a header, the
// configuration file, a flag, a cursor): pure, no HTTP type. Internal to
// the server.
#pragma once

#include <optional>
#include <string_view>

namespace hourglass::server::detail {

// ASCII case-insensitive equality. Not Beast's iequals: Boost 1.81's reads
// one byte past both strings when they differ only in the case of their
// last character (request_rules_fuzz found it on a Host "localHost").
bool iequals(std::string_view a, std::string_view b) noexcept;

// 32 lower-case hex digits: the shape of every job id.
bool is_job_id(std::string_view s) noexcept;

// `jitter=full` (true) or `jitter=none` (false), spaces and case aside; else
// nullopt. The parameter of Job-Backoff and of --retry.
std::optional<bool> read_jitter_parameter(std::string_view text) noexcept;

}  // namespace hourglass::server::detail
