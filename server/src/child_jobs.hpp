// A handler's child jobs (http_server::enqueue_child): async jobs whose
// freshness and whole deadline are cut to what their parent has left, and
// which name their parent, so cancelling the parent cancels them.
// Internal to the server.
#pragma once

#include "hourglass/context.hpp"
#include "hourglass/server/handler.hpp"

namespace hourglass::server::detail {

struct core;

// What a child may carry: each bound it asks for, cut to `left` = the
// parent's remaining budget - `reserve` (the reserve keeps back what the
// parent needs to use the answer). `fits`: more is left than the child's
// minimum budget, so it may be enqueued at all. A parent without a
// deadline leaves the child what it asked.
struct child_terms {
  duration freshness = duration::max();
  duration deadline = duration::max();
  duration left = duration::max();
  bool fits = true;
};
child_terms cut_to_parent(const child_job& asked, duration parent_remaining, duration reserve,
                          duration min_budget) noexcept;

// Enqueues `job` in the daemon's job store as a child of the job `parent`
// runs (its job_id; a sync job's children name no parent) and waits for
// the store's answer. From a handler on a worker thread (not a run_inline
// one: the fleet's store answers on the I/O threads).
child_answer enqueue_child(core& c, const context& ctx, const request_view& parent, child_job job);

}  // namespace hourglass::server::detail
