// The fleet's multi-key writes, each one Lua script so it is atomic on the
// broker (docs/fleet.md, "Layout"). Per script: its text, the C++ type of its
// reply, and the decoder from the broker's reply to that type.
//
// The scripts are fleet/lua/<name>.lua, one per file, each opening with its
// contract (KEYS, ARGV, the reply's exact shape; also in
// docs/reference/fleet-layout.md), so one runs by hand with
// `redis-cli --eval`. fleet/CMakeLists.txt embeds them at build time as
// <name>_script in the generated fleet_scripts.inc. Every key a script
// touches is in KEYS and in the queue's hash tag, so a queue lives on one
// Redis Cluster slot.
//
// The decoders are pure: they read a reply and never call the broker. A
// reply of the wrong shape throws redis_unavailable ("redis: <script>: ...").
// Internal to fleet/.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fleet_scripts.inc"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/fleet/redis.hpp"

namespace hourglass::fleet::detail {

// A duration as the scripts take it in ARGV: whole milliseconds.
std::string millis(duration d);

// Throws redis_unavailable("redis: <what>: <r's error text, or "unexpected reply">").
[[noreturn]] void broker_error(const std::string& what, const redis_reply& r);

// ---- snapshot_script: what admission at enqueue reads, in one round trip ----
struct snapshot_reply {
  std::uint64_t backlog = 0;              // entries not yet delivered
  std::chrono::microseconds mean_run{0};  // the fleet's mean run time
  std::uint64_t live_slots = 0;           // worker slots whose lease has not expired
  std::string prior_id;                   // the job the idempotency key names; empty: none
};
// Negative counts read as 0. Not a four-element array: "admission snapshot".
snapshot_reply decode_snapshot(const redis_reply& r);

// ---- enqueue_script: adds the job, unless its idempotency key names one ----
struct enqueue_reply {
  enum class kind { accepted, duplicate, nostream };
  kind verdict = kind::accepted;
  std::string id;  // accepted: the stream entry id; duplicate: the prior job's id
};
// Not a two-element array: "enqueue". A first element other than "duplicate"
// or "nostream" reads as accepted.
enqueue_reply decode_enqueue(const redis_reply& r);

// ---- finish_script: the job's one recorded outcome, first wins ----
// "first", "duplicate"; anything else reads as unknown.
finish_result decode_finish(const redis_reply& r) noexcept;

// ---- cancel_script: a queued job cancelled on the spot, a running one marked ----
enum class cancel_reply { cancelled, marked, finished, unknown };
// "cancelled", "marked", "unknown"; anything else reads as finished.
cancel_reply decode_cancel(const redis_reply& r) noexcept;

// ---- start_script: the last check before a worker starts a delivered job ----
using start_reply = job_queue::start_answer;
// Fewer than four elements, or a "run" verdict without eight: "start". A
// TIME that is not a time: "redis: TIME is not a time". An unknown verdict
// reads as gone.
start_reply decode_start(const redis_reply& r);

// ---- renew_script: lease, slots and held entries, every lease/3 ----
using renew_reply = job_queue::renew_answer;
// {"fenced"}, or the eight elements {"ok", marked, lost, TIME s, TIME us,
// backlog, pending, deleted}; any other shape: "renew". A TIME that is not a
// time: "redis: TIME is not a time". Negative counts read as 0.
renew_reply decode_renew(const redis_reply& r);

// ---- hand_back_script: drain, the held entries back for reclaim ----
// How many entries were still held. Not an integer: "hand back".
std::size_t decode_hand_back(const redis_reply& r);

// ---- release_script: a leaving daemon's lease and slots ----
// Whether they were still its own (and are gone now). Never throws: nothing
// is left to do either way.
bool decode_release(const redis_reply& r) noexcept;

}  // namespace hourglass::fleet::detail
