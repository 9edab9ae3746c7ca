// A person's wait (handler_result::wait_for_signal): a job that waits for a
// named signal on a clock of its own. Its machine budget stands still while
// it waits; only the wait's own limit runs. Pure rules, shared by the memory
// store and the fleet's. Internal to the server.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "hourglass/server/handler.hpp"
#include "hourglass/time.hpp"

namespace hourglass::server::detail {

// The job's overall deadline once a signal resumes it: moved on by the time
// it waited (from `waited_since` to `now`), so it has what it had left when
// it began to wait. A job without a deadline keeps none.
time_point resumed_deadline(time_point deadline, time_point waited_since, time_point now) noexcept;

// A signal's name: as a handler's (1 to 64 of [A-Za-z0-9._-]).
bool valid_signal_name(std::string_view name) noexcept;

// A handler's result that waits for a signal nobody could send (a name
// the signal endpoint refuses), or for its children and a signal at once,
// is its error: throws handler_error 500 invalid_signal / invalid_wait.
void check_wait(const handler_result& r);

// The wait as the job object and the fleet's job hash spell it
// ("signal:<name>"), and the name back out of one (nullopt: not a signal's).
std::string signal_rule(std::string_view name);
std::optional<std::string_view> signal_of_rule(std::string_view rule) noexcept;

// A signal's payload is small: what a person's answer needs, not a file.
inline constexpr std::size_t max_signal_payload = 64 * 1024;

}  // namespace hourglass::server::detail
