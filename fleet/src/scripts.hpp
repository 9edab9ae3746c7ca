// The fleet's multi-key writes, each one Lua script so it is atomic on the
// broker (docs/fleet.md, "Layout"). Every key a script touches is in KEYS and
// in the queue's hash tag, so a queue lives on one Redis Cluster slot.
// Internal to fleet/.
#pragma once

namespace hourglass::fleet::detail {

// What admission at enqueue reads, in one round trip.
// KEYS: stream, slots hash, stats hash, idempotency key
// ARGV: group, has-idempotency-key ("1"/"0")
// -> {backlog, mean_run_us, live_slots, prior_id_or_empty}
inline constexpr const char* snapshot_script = R"lua(
local prior = ''
if ARGV[2] == '1' then prior = redis.call('GET', KEYS[4]) or '' end
local len = redis.call('XLEN', KEYS[1])
local pending = 0
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1])
if ok then pending = p[1] end
local mean = tonumber(redis.call('HGET', KEYS[3], 'mean_run_us') or '0') or 0
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = 0
local slots = redis.call('HGETALL', KEYS[2])
for i = 1, #slots, 2 do
  local n, expiry = string.match(slots[i + 1], '^(%d+):(%d+)$')
  if n and tonumber(expiry) > now_ms then live = live + tonumber(n) end
end
return {len - pending, math.floor(mean), live, prior}
)lua";

// Adds the job, unless its idempotency key already names one.
// KEYS: stream, job hash, idempotency key
// ARGV: id, handler, payload, content type, freshness ms (-1: none),
//       min budget ms, has-idempotency-key, idempotency key, idempotency ttl ms
// -> {'accepted', entry id} | {'duplicate', prior id}
inline constexpr const char* enqueue_script = R"lua(
if ARGV[7] == '1' then
  local prior = redis.call('GET', KEYS[3])
  if prior then return {'duplicate', prior} end
end
local entry = redis.call('XADD', KEYS[1], '*', 'id', ARGV[1])
redis.call('HSET', KEYS[2], 'id', ARGV[1], 'handler', ARGV[2], 'payload', ARGV[3], 'content_type', ARGV[4],
  'freshness_ms', ARGV[5], 'min_budget_ms', ARGV[6], 'entry', entry, 'state', 'queued', 'deliveries', '0',
  'idempotency_key', ARGV[8])
if ARGV[7] == '1' then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[9]) end
return {'accepted', entry}
)lua";

// The job's one recorded outcome: the first finish wins and is kept for the
// result TTL; its stream entry is acknowledged and deleted (so the stream
// holds only live work and never needs MAXLEN). A later finish is counted.
// KEYS: stream, job hash, stats hash
// ARGV: group, result ttl ms, run us (-1: it did not run), then field/value pairs
// -> 'first' | 'duplicate' | 'unknown'
inline constexpr const char* finish_script = R"lua(
local state = redis.call('HGET', KEYS[2], 'state')
if not state then return 'unknown' end
if state ~= 'queued' and state ~= 'running' then
  redis.call('HINCRBY', KEYS[3], 'duplicate_outcomes', 1)
  return 'duplicate'
end
local entry = redis.call('HGET', KEYS[2], 'entry')
redis.call('XACK', KEYS[1], ARGV[1], entry)
redis.call('XDEL', KEYS[1], entry)
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
redis.call('HDEL', KEYS[2], 'payload')
redis.call('PEXPIRE', KEYS[2], ARGV[2])
local run = tonumber(ARGV[3])
if run >= 0 then
  -- EWMA (alpha 1/16) of run times, for the fleet's predicted wait.
  local mean = tonumber(redis.call('HGET', KEYS[3], 'mean_run_us') or '-1') or -1
  if mean < 0 then mean = run else mean = mean + (run - mean) / 16 end
  redis.call('HSET', KEYS[3], 'mean_run_us', tostring(mean))
end
return 'first'
)lua";

// DELETE: a queued job is finished as cancelled on the spot (its entry,
// delivered or not, is acknowledged and deleted); a running one is marked,
// and the daemon running it stops it at its next lease renewal.
// KEYS: stream, job hash
// ARGV: group, result ttl ms
// -> 'cancelled' | 'marked' | 'finished' | 'unknown'
inline constexpr const char* cancel_script = R"lua(
local state = redis.call('HGET', KEYS[2], 'state')
if not state then return 'unknown' end
if state == 'running' then
  redis.call('HSET', KEYS[2], 'cancel_requested', '1')
  return 'marked'
end
if state ~= 'queued' then return 'finished' end
local entry = redis.call('HGET', KEYS[2], 'entry')
redis.call('XACK', KEYS[1], ARGV[1], entry)
redis.call('XDEL', KEYS[1], entry)
redis.call('HSET', KEYS[2], 'state', 'cancelled', 'cause', 'requested', 'cancel_requested', '1')
redis.call('HDEL', KEYS[2], 'payload')
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 'cancelled'
)lua";

}  // namespace hourglass::fleet::detail
