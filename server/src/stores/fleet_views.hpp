// The API's objects (job_view, queue_view) of what the fleet's broker
// holds: pure functions of the broker's replies. Internal to the server.
#pragma once

#include <cstdint>
#include <string>

#include "core/job_view.hpp"
#include "core/queue_view.hpp"
#include "hourglass/fleet/job_queue.hpp"

namespace hourglass::server::detail {

// The job object of a job as the broker holds it; `broker_now_ms`: the
// broker's clock as we estimate it, for a scheduled job's due_in_ms.
job_view view_of(const fleet::fleet_job& j, std::int64_t broker_now_ms);

// The queue object of the broker's view of queue `name`.
queue_view view_of(const fleet::queue_state& s, std::string name);

}  // namespace hourglass::server::detail
