// The API's objects (job_view, queue_view, created) of what the fleet's
// broker holds and answers: pure functions of its replies. Internal to the
// server.
#pragma once

#include <cstdint>
#include <string>

#include "core/job_store.hpp"
#include "core/job_view.hpp"
#include "core/queue_view.hpp"
#include "hourglass/fleet/job_queue.hpp"

namespace hourglass::server::detail {

// The job object of a job as the broker holds it; `broker_now_ms`: the
// broker's clock as we estimate it, for a scheduled job's due_in_ms.
job_view view_of(const fleet::fleet_job& j, std::int64_t broker_now_ms);

// The queue object of the broker's view of queue `name`.
queue_view view_of(const fleet::queue_state& s, std::string name);

// The enqueue script's verdict on a job as the store answers it: accepted
// (queued, or scheduled when delayed), a repeated Idempotency-Key's first
// job (its state as the broker last wrote it is read apart), or a refusal:
// the queue paused, the parent's family, or admission (`asked` and `left`:
// the budget the job asked for and had left, for the 504).
created created_of(const fleet::enqueued& r, duration asked, duration left);

}  // namespace hourglass::server::detail
