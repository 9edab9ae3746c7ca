// The fleet's multi-key writes, each one Lua script so it is atomic on the
// broker (docs/fleet.md, "Layout"). Per script: its text, the C++ type of its
// reply, and the decoder from the broker's reply to that type.
//
// The scripts are fleet/lua/<name>.lua, one per file, each opening with its
// contract (KEYS, ARGV, the reply's exact shape), so one runs by hand with
// `redis-cli --eval`; docs/reference/fleet-layout.md shows a copy that
// tools/fleet-contracts makes and the docs.fleet_contracts test checks. fleet/CMakeLists.txt embeds them at build time
// as <name>_script in the generated fleet_scripts.inc. Every key a script touches is in KEYS and in the queue's hash
// tag, so a queue lives on one Redis Cluster slot.
//
// Per script, beside each other: its encoder, the KEYS and ARGV in its
// header's order (script_call), and its decoder. Both are pure: they never
// call the broker. A reply of the wrong shape throws redis_unavailable
// ("redis: <script>: ...").
// The reply's shape is the script's header's ("Reply:"); what is written
// here is only how a decoder reads it, and what it does with a reply that
// is off.
// Internal to fleet/.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "broker_error.hpp"
#include "fleet_scripts.inc"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/fleet/redis.hpp"

namespace hourglass::fleet::detail {

// One script call as sent: the script, its KEYS and its ARGV.
struct script_call {
  std::string_view script;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

// A queue's (or shard's) key names, hg:{<tag>}:<suffix>: one hash slot.
struct queue_keys {
  std::string_view tag;
  std::string operator()(std::string_view suffix) const;
};

// Shared by the decoders: the broker's TIME as two replies, in µs ("redis:
// TIME is not a time" when it is not one); an integer reply, negatives as 0.
std::int64_t broker_us(const redis_reply& s, const redis_reply& us);
long long at_least_zero(const redis_reply& r) noexcept;

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
struct enqueue_item {
  std::string_view id;
  const job_spec* job = nullptr;
  duration freshness{};  // what is left of each as the batch leaves (max: none)
  duration deadline{};
};
script_call encode_enqueue(const queue_keys& k, const queue_options& o, bool refuse_paused,
                           const std::vector<enqueue_item>& jobs);

// ---- finish_script: each job's one recorded outcome (or retry), first wins ----
// One status per job: "first", "scheduled", "no_budget", "duplicate";
// anything else reads as unknown.
// Then, when the finish resumed a parent whose children it cancelled, their
// handlers (into *cancelled, when given). Not an array of `jobs` (or of
// `jobs` and that array): "finish".
std::vector<finish_result> decode_finish(const redis_reply& r, std::size_t jobs,
                                         std::vector<std::string>* cancelled = nullptr);
// An outcome without a final "state" field throws std::invalid_argument: the
// job would leave the stream unfinished.
script_call encode_finish(const queue_keys& k, duration result_ttl, std::string_view token,
                          const std::vector<job_queue::outcome>& outcomes);

// ---- cancel_script: a queued job cancelled on the spot, a running one marked ----
enum class cancel_reply { cancelled, marked, finished, unknown };
// {"cancelled" | "marked" | "unknown", handlers...} (or the status alone);
// anything else reads as finished.
cancel_reply decode_cancel(const redis_reply& r) noexcept;
// The handlers of the descendants that reply says were cancelled on the spot.
std::vector<std::string> decode_cancelled_family(const redis_reply& r);
script_call encode_cancel(const queue_keys& k, std::string_view id, duration result_ttl, cancel_cause cause);

// ---- signal_script: a person's answer to a waiting job ----
// signal.lua's reply (the job itself is read after).
signal_answer decode_signal(const redis_reply& r);
script_call encode_signal(const queue_keys& k, std::string_view id, std::string name, std::string payload,
                          duration result_ttl);

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
struct start_item {
  std::string_view entry, job_id, token;
};
script_call encode_start(const queue_keys& k, const queue_options& o, std::string_view consumer,
                         unsigned max_deliveries, const std::vector<start_item>& jobs);
// Taken: {TIME s, TIME us, then at most `count` {entry id, {field, value,
// ...}, start answer}}; an answer 'late' reads as no start (nullopt). Any
// other shape: "take".
job_queue::taken decode_take(const redis_reply& r, std::size_t count);
script_call encode_take(const queue_keys& k, const queue_options& o, std::string_view consumer, unsigned max_deliveries,
                        std::size_t count, std::string_view lease_token, bool judge_late);

// ---- renew_script: lease, slots and held entries, every lease/3 ----
using renew_reply = job_queue::renew_answer;
// {"fenced"}, or renew.lua's twelve elements; any other shape: "renew". A
// TIME that is not a time: "redis: TIME is not a time". Negative counts
// read as 0; a non-empty `paused` reads as paused.
renew_reply decode_renew(const redis_reply& r);
script_call encode_renew(const queue_keys& k, std::string_view consumer, const lease_value& lease_v, duration lease,
                         std::size_t slots, const std::vector<job_queue::held_entry>& held);

// ---- promote_script: due jobs from the delayed set to the stream ----
struct promote_reply : job_queue::promoted {
  bool nostream = false;  // no stream: nothing moved
};
// {"nostream"}, or promote.lua's seven elements (next_due_ms -1: none); any
// other shape: "promote".
promote_reply decode_promote(const redis_reply& r);
// predicted_wait: none under --policy fifo (no admission); max: unbounded.
script_call encode_promote(const queue_keys& k, std::optional<duration> predicted_wait, duration result_ttl,
                           const std::vector<std::string>& job_ids);

// ---- schedule_script: a periodic job's record ----
// A decimal integer as a script returns it in a string; `fallback` when empty or not one.
std::int64_t number_or(std::string_view text, std::int64_t fallback) noexcept;
// look: seven elements; any other shape: "schedule".
job_queue::schedule_record decode_schedule_look(const redis_reply& r);
script_call encode_schedule_look(const queue_keys& k, std::string_view name);
// settle: whether this caller settled the fire. Not an integer: "schedule".
bool decode_schedule_settle(const redis_reply& r);
script_call encode_schedule_settle(const queue_keys& k, std::string_view name, std::int64_t fire_ms,
                                   std::uint64_t missed, std::int64_t settled_ms);
// ran: not an integer: "schedule".
void decode_schedule_ran(const redis_reply& r);
script_call encode_schedule_ran(const queue_keys& k, std::string_view name, std::string_view job_id);

// ---- shards_script: a sharded queue's record of its shards' tags ----
// The record in force. Not a string: "shards".
std::string decode_shards(const redis_reply& r);
script_call encode_shards(const queue_keys& k, std::string expected, std::string desired);

// ---- list_script: a page of job ids along an index, or a SCAN ----
struct list_page {
  std::string next_cursor;  // "" once the index is read to its end
  std::vector<std::string> ids;
};
// Not a non-empty array: "list".
list_page decode_list(const redis_reply& r);
// index: "" (SCAN the job hashes, filtered on `state`), "stream", "delayed" or "dead".
script_call encode_list(const queue_keys& k, std::string_view index, std::string cursor, std::size_t count,
                        std::string_view state);

// ---- queue_script: a queue at a glance, and its pause switch ----
// Fourteen elements (queue.lua says which); any other shape: "queue".
queue_state decode_queue(const redis_reply& r);
script_call encode_queue(const queue_keys& k, queue_op op);

// ---- dead_script: replay or delete a dead-lettered job ----
// {'accepted'|'refused', entry, wait us} | {'deleted'} | {'not_dead', state}
// | {'unknown'}; {'nostream'} and any other shape: "dead".
dead_answer decode_dead(const redis_reply& r);
script_call encode_dead_replay(const queue_keys& k, std::string_view id, duration freshness, duration min_budget,
                               bool admission);
script_call encode_dead_delete(const queue_keys& k, std::string_view id);
// purge: {jobs deleted, entries deleted, entries left}; any other shape: "dead".
job_queue::purged decode_purge(const redis_reply& r);
script_call encode_dead_purge(const queue_keys& k, std::size_t count);

// ---- hand_back_script: drain, the held entries back for reclaim ----
// How many entries were still held. Not an integer: "hand back".
std::size_t decode_hand_back(const redis_reply& r);
script_call encode_hand_back(const queue_keys& k, std::string_view consumer, std::string_view lease_token,
                             const std::vector<job_queue::held_entry>& held);

// ---- release_script: a leaving daemon's lease and slots ----
// Whether they were still its own (and are gone now). Never throws: nothing
// is left to do either way.
bool decode_release(const redis_reply& r) noexcept;
script_call encode_release(const queue_keys& k, std::string_view consumer, std::string_view token);

}  // namespace hourglass::fleet::detail
