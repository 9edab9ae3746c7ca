// The job hash's field names (hg:{Q}:job:<id>, docs/reference/fleet-layout.md
// "Job hash"), as C++ reads them: job_queue_producer.cpp decodes a hash into
// the typed fleet_job through these, and the tests that put a hash in place
// write through them (tests/fleet/job_hash.hpp). The scripts write the same
// names; the conformance and script tests read them back through fleet_job.
// Internal to fleet/.
#pragma once

#include <string_view>

namespace hourglass::fleet::detail::job_field {

// written at enqueue
inline constexpr std::string_view id = "id";
inline constexpr std::string_view handler = "handler";
inline constexpr std::string_view payload = "payload";
inline constexpr std::string_view content_type = "content_type";
inline constexpr std::string_view freshness_ms = "freshness_ms";
inline constexpr std::string_view min_budget_ms = "min_budget_ms";
inline constexpr std::string_view idempotency_key = "idempotency_key";
inline constexpr std::string_view accepted_ms = "accepted_ms";
inline constexpr std::string_view due_ms = "due_ms";
inline constexpr std::string_view deadline_us = "deadline_us";
inline constexpr std::string_view attempt = "attempt";
inline constexpr std::string_view max_attempts = "max_attempts";
inline constexpr std::string_view retry_base_us = "retry_base_us";
inline constexpr std::string_view retry_cap_us = "retry_cap_us";
inline constexpr std::string_view retry_jitter = "retry_jitter";
// its family
inline constexpr std::string_view parent = "parent";
inline constexpr std::string_view children = "children";
inline constexpr std::string_view children_done = "children_done";
inline constexpr std::string_view children_ok = "children_ok";
inline constexpr std::string_view depth = "depth";
// its way through the queue
inline constexpr std::string_view state = "state";
inline constexpr std::string_view entry = "entry";
inline constexpr std::string_view deliveries = "deliveries";
inline constexpr std::string_view consumer = "consumer";
inline constexpr std::string_view started_ms = "started_ms";
inline constexpr std::string_view starts = "starts";
inline constexpr std::string_view attempts = "attempts";
inline constexpr std::string_view cancel_requested = "cancel_requested";
inline constexpr std::string_view cancel_cause = "cancel_cause";
inline constexpr std::string_view start_token = "start_token";
inline constexpr std::string_view finish_token = "finish_token";
inline constexpr std::string_view dead_entry = "dead_entry";  // a dead-lettered job's entry in hg:{Q}:dead
// a wait (children, a wake time, a person's signal)
inline constexpr std::string_view wait_rule = "wait_rule";
inline constexpr std::string_view wake_ms = "wake_ms";
inline constexpr std::string_view wakes = "wakes";
inline constexpr std::string_view woke_by = "woke_by";
inline constexpr std::string_view human_since_us = "human_since_us";
inline constexpr std::string_view human_waited_us = "human_waited_us";
inline constexpr std::string_view signal_payload = "signal_payload";
// its outcome
inline constexpr std::string_view stage = "stage";
inline constexpr std::string_view cause = "cause";
inline constexpr std::string_view reason = "reason";
inline constexpr std::string_view error = "error";
inline constexpr std::string_view message = "message";
inline constexpr std::string_view http_status = "http_status";
inline constexpr std::string_view queued_ms = "queued_ms";
inline constexpr std::string_view run_ms = "run_ms";
inline constexpr std::string_view committed = "committed";
inline constexpr std::string_view result = "result";

}  // namespace hourglass::fleet::detail::job_field
