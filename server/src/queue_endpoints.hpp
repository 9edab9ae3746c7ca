// The queue endpoints, from a parsed request to a response, on the job
// store (job_store::queue_state); no socket. Internal to the server.
//   GET /v1/queues                        -> {"queues": [queue object]}
//   GET /v1/queues/{name}                 -> the queue object
//   POST /v1/queues/{name}/pause|resume   -> the queue object afterwards (admin)
#pragma once

#include <string_view>

#include "job_endpoints.hpp"

namespace hourglass::server::detail {

// `name` "" for the list. 404 for a queue this daemon does not serve; 409
// pause_unsupported (the memory store); 503 when the broker cannot be read.
void answer_queue(core& c, std::string_view name, queue_action a, answer_fn done);

}  // namespace hourglass::server::detail
