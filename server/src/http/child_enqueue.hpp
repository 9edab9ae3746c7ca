// A handler's child job (http_server::enqueue_child) enters the job store
// as a client's async POST does: judged against what its parent has left
// (cut_to_parent, child_jobs.hpp), and booked like any refused job when
// refused. Internal to the server.
#pragma once

#include "hourglass/server/handler.hpp"

namespace hourglass::server::detail {

struct core;

// Enqueues `job` in the daemon's job store as a child of the job `parent`
// runs (its job_id; a sync job's children name no parent) and waits for
// the store's answer. From a handler on a worker thread (not a run_inline
// one: the fleet's store answers on the I/O threads).
child_answer enqueue_child(core& c, const context& ctx, const request_view& parent, child_job job);

}  // namespace hourglass::server::detail
