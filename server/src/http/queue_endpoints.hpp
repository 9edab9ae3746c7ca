// The queue endpoints, from a parsed request to a response, on the job
// store (job_store::queue_state); no socket. Internal to the server.
//   GET /v1/queues                        -> {"queues": [queue object]}
//   GET /v1/queues/{name}                 -> the queue object
//   POST /v1/queues/{name}/pause|resume   -> the queue object afterwards (admin)
//   POST /v1/jobs/{id}/replay             -> 202, the dead job queued again (admin)
//   DELETE /v1/queues/{name}/dead/{id}    -> the dead job deleted (admin)
//   DELETE /v1/queues/{name}/dead?limit=&confirm=yes -> the oldest purged (admin)
//   POST /v1/queues/{name}/dead/replay?limit=&confirm=yes -> the oldest replayed (admin)
#pragma once

#include <string_view>

#include "http/job_endpoints.hpp"

namespace hourglass::server::detail {

// `name` "" for the list. 404 for a queue this daemon does not serve; 409
// pause_unsupported (the memory store); 503 when the broker cannot be read.
void answer_queue(core& c, std::string_view name, queue_action a, answer_fn done);

// A dead job admitted again with `freshness` from now: 202 as an enqueue's;
// 504 deadline_exceeded (stage admission) when it cannot start in time; 409
// not_dead, or dead_letter_unsupported (memory); 404; 503.
void answer_replay(core& c, std::string id, duration freshness, answer_fn done);
// One dead job deleted: 200 {"deleted": 1}; as above otherwise.
void answer_delete_dead(core& c, std::string_view queue, std::string id, answer_fn done);
// The oldest dead jobs, at most `limit` (1 to 1000, default 100) and only
// with confirm=yes: 200 {"purged", "entries", "left"}; 400 otherwise.
void answer_purge_dead(core& c, std::string_view queue, std::string_view target, answer_fn done);
// The oldest dead jobs, at most `limit` (as purge's, confirm=yes too), each
// replayed as answer_replay does, oldest first, stopping at the first one
// admission refuses (the ones after it would wait longer still):
// 200 {"replayed", "refused", "skipped", "left"}.
void answer_replay_dead_bulk(core& c, std::string_view queue, std::string_view target, duration freshness,
                             answer_fn done);

}  // namespace hourglass::server::detail
