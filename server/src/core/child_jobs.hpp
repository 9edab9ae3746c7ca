// A handler's child jobs (http_server::enqueue_child): async jobs whose
// freshness and whole deadline are cut to what their parent has left, and
// which name their parent, so cancelling the parent cancels them.
// Internal to the server.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/job_view.hpp"
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

// Why a child job cannot join its parent: the parent is not held (unknown,
// or its record expired), has finished, is as deep in its family as a job
// may have children, or has as many children as a parent may.
enum class parent_problem { unknown, finished, too_deep, too_many_children };

// How far one family of jobs may grow (--max-job-depth, --max-children):
// what keeps a client from building a chain or a tree that every walk over
// it (a cancel, a parent's GET, its wait) pays for.
struct family_limits {
  std::size_t max_depth = 64;  // a job without a parent is at depth 0
  std::size_t max_children = 1000;
};
// Whether a parent at `parent_depth` with `children` already may have one
// more (nullopt: it may).
std::optional<parent_problem> family_bound(std::size_t parent_depth, std::size_t children,
                                           const family_limits& limits) noexcept;

// ---- fan-in: a parent waiting for its children (handler_result::wait_for) ----

// Whether the wait is over: of the parent's `total` children, `done` have
// an outcome, `ok` of them ok. A parent without children waits for none.
bool fan_in_satisfied(const fan_in& f, std::size_t total, std::size_t done, std::size_t ok) noexcept;
// When the wait ends whatever has finished: the job's overall deadline less
// f.keep (zero: the handler's minimum budget), so the resumed run has that
// long to answer. time_point::max() for a job without a deadline.
time_point wake_time(time_point deadline, const fan_in& f, duration min_budget) noexcept;
// What the wait keeps back before the deadline: f.keep, or the minimum budget.
duration wake_keep(const fan_in& f, duration min_budget) noexcept;
// The wait as the job object (and the fleet's job hash) spells it: "all",
// "first:<n>", "first_success"; and back (nullopt for anything else).
std::string fan_in_text(const fan_in& f);
std::optional<fan_in> parse_fan_in(std::string_view text);
// A child's job object as its resumed parent sees it.
child_outcome outcome_of_child(const job_view& j);
// A resumed parent's children as they are now, in the order it enqueued
// them, read from the daemon's store; those still unfinished are cancelled
// (cause parent): the wait is over, nobody waits for them. From a worker
// thread (the fleet's store answers on the I/O threads).
std::vector<child_outcome> children_at_wake(core& c, const std::string& parent);

}  // namespace hourglass::server::detail
