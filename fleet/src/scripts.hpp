// The fleet's multi-key writes, each one Lua script so it is atomic on the
// broker (docs/fleet.md, "Layout"). Per script: its text, the C++ type of its
// reply, and the decoder from the broker's reply to that type.
//
// The scripts are fleet/lua/<name>.lua, one per file, each opening with its
// contract (KEYS, ARGV, the reply's exact shape), so one runs by hand with
// `redis-cli --eval`; docs/reference/fleet-layout.md shows a copy that
// tools/fleet-contracts makes and the docs.fleet_contracts test checks. fleet/CMakeLists.txt embeds them at build time as
// <name>_script in the generated fleet_scripts.inc. Every key a script
// touches is in KEYS and in the queue's hash tag, so a queue lives on one
// Redis Cluster slot.
//
// The decoders are pure: they read a reply and never call the broker. A
// reply of the wrong shape throws redis_unavailable ("redis: <script>: ...").
// The reply's shape is the script's header's ("Reply:"); what is written
// here is only how a decoder reads it, and what it does with a reply that
// is off.
// Internal to fleet/.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "broker_error.hpp"
#include "fleet_scripts.inc"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/fleet/redis.hpp"

namespace hourglass::fleet::detail {

// ---- enqueue_script: a batch of jobs, each admitted on its own ----
struct enqueue_reply {
  enum class kind { accepted, duplicate, refused, no_parent, parent_finished, too_deep, too_many_children };
  kind verdict = kind::accepted;
  std::string id;             // accepted: the stream entry id; duplicate: the prior job's id
  duration predicted_wait{};  // what admission judged (zero when not needed; max: unbounded)
};
struct enqueue_batch_reply {
  bool nostream = false;  // no stream: nothing written
  bool paused = false;    // the queue is paused and the caller refuses then: nothing written
  std::vector<enqueue_reply> jobs;
};
// {"nostream"}, {"paused"}, or `jobs` three-element arrays; any other shape: "enqueue".
// A verdict other than "duplicate", "refused", "no_parent",
// "parent_finished", "too_deep" or "too_many_children" reads as accepted.
enqueue_batch_reply decode_enqueue(const redis_reply& r, std::size_t jobs);

// ---- finish_script: each job's one recorded outcome (or retry), first wins ----
// One status per job: "first", "scheduled", "no_budget", "duplicate";
// anything else reads as unknown.
// Then, when the finish resumed a parent whose children it cancelled, their
// handlers (into *cancelled, when given). Not an array of `jobs` (or of
// `jobs` and that array): "finish".
std::vector<finish_result> decode_finish(const redis_reply& r, std::size_t jobs,
                                         std::vector<std::string>* cancelled = nullptr);

// ---- cancel_script: a queued job cancelled on the spot, a running one marked ----
enum class cancel_reply { cancelled, marked, finished, unknown };
// {"cancelled" | "marked" | "unknown", handlers...} (or the status alone);
// anything else reads as finished.
cancel_reply decode_cancel(const redis_reply& r) noexcept;
// The handlers of the descendants that reply says were cancelled on the spot.
std::vector<std::string> decode_cancelled_family(const redis_reply& r);
// signal.lua's reply (the job itself is read after).
signal_answer decode_signal(const redis_reply& r);

// ---- start_script: the last check before workers start delivered jobs ----
struct start_batch_reply {
  std::int64_t broker_now_us = 0;
  std::vector<job_queue::start_answer> jobs;  // each with broker_now_us set
};
// Not {TIME s, TIME us, then `jobs` answers}, or an answer that is not an
// array of at least two, or a "run" verdict without fifteen: "start". A
// retry field that is not a number reads as none (attempt 1, max 1, base
// and cap 0, no deadline). A TIME
// that is not a time: "redis: TIME is not a time". An unknown verdict reads
// as gone.
start_batch_reply decode_start(const redis_reply& r, std::size_t jobs);
// Taken: {TIME s, TIME us, then at most `count` {entry id, {field, value,
// ...}, start answer}}; an answer 'late' reads as no start (nullopt). Any
// other shape: "take".
job_queue::taken decode_take(const redis_reply& r, std::size_t count);

// ---- renew_script: lease, slots and held entries, every lease/3 ----
using renew_reply = job_queue::renew_answer;
// {"fenced"}, or renew.lua's twelve elements; any other shape: "renew". A
// TIME that is not a time: "redis: TIME is not a time". Negative counts
// read as 0; a non-empty `paused` reads as paused.
renew_reply decode_renew(const redis_reply& r);

// ---- promote_script: due jobs from the delayed set to the stream ----
struct promote_reply : job_queue::promoted {
  bool nostream = false;  // no stream: nothing moved
};
// {"nostream"}, or promote.lua's seven elements (next_due_ms -1: none); any
// other shape: "promote".
promote_reply decode_promote(const redis_reply& r);

// ---- schedule_script: a periodic job's record (job_queue.cpp reads its replies) ----
// A decimal integer as a script returns it in a string; `fallback` when empty or not one.
std::int64_t number_or(std::string_view text, std::int64_t fallback) noexcept;

// ---- queue_script: a queue at a glance, and its pause switch ----
// Fourteen elements (queue.lua says which); any other shape: "queue".
queue_state decode_queue(const redis_reply& r);

// ---- dead_script: replay or delete a dead-lettered job ----
// {'accepted'|'refused', entry, wait us} | {'deleted'} | {'not_dead', state}
// | {'unknown'}; {'nostream'} and any other shape: "dead".
dead_answer decode_dead(const redis_reply& r);

// ---- hand_back_script: drain, the held entries back for reclaim ----
// How many entries were still held. Not an integer: "hand back".
std::size_t decode_hand_back(const redis_reply& r);

// ---- release_script: a leaving daemon's lease and slots ----
// Whether they were still its own (and are gone now). Never throws: nothing
// is left to do either way.
bool decode_release(const redis_reply& r) noexcept;

}  // namespace hourglass::fleet::detail
