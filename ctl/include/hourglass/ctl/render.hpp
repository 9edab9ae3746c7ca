// The hourglass command's text output: the API's JSON objects as aligned
// tables and field lists for a terminal. Pure functions of the JSON, tested
// without a daemon. Every string from the daemon is shown with its control
// characters escaped (\x1b...), so a hostile job cannot drive the terminal.
#pragma once

#include <boost/json/value.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace hourglass::ctl {

// `s` with control characters other than those kept (newline, tab, when
// `keep_newlines`) written as \xNN, and the C1 controls and bidirectional
// overrides a terminal would act on (U+0080-U+009F, U+202A-U+202E,
// U+2066-U+2069) as \uNNNN.
std::string terminal_safe(std::string_view s, bool keep_newlines = false);

// "84 ms", "1.5 s", "3.2 min", "2.0 h"; "-" for a missing number.
std::string human_ms(const boost::json::value* ms);

// GET /v1/queues ({"queues": [...]}) or /v1/queues/{name} (one queue): one
// row per queue, then each queue's consumers.
std::string queues_text(const boost::json::value& answer);

// Job objects as rows: id, handler, state, and what else matters for its state.
std::string jobs_text(const std::vector<boost::json::object>& jobs);

// One job object: a field a line, its attempts, its result last.
std::string job_text(const boost::json::object& job);

// A refusal: "409 not_dead: the job is queued" from the status and the
// API's error body (or the body itself when it is not JSON).
std::string refusal_text(unsigned status, std::string_view body);

}  // namespace hourglass::ctl
