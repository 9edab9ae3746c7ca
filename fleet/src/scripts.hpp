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
// -> {'accepted', entry id} | {'duplicate', prior id} | {'nostream', ''}
inline constexpr const char* enqueue_script = R"lua(
if ARGV[7] == '1' then
  local prior = redis.call('GET', KEYS[3])
  if prior then return {'duplicate', prior} end
end
-- NOMKSTREAM: a stream deleted behind our back is not recreated without
-- its consumer group (the caller creates both and retries).
local entry = redis.call('XADD', KEYS[1], 'NOMKSTREAM', '*', 'id', ARGV[1], 'handler', ARGV[2],
  'freshness_ms', ARGV[5], 'min_budget_ms', ARGV[6])
if not entry then return {'nostream', ''} end
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

// A worker is about to start a delivered job: the last check, atomic with
// marking it running. Refuses an entry this consumer no longer holds (it was
// reclaimed by another), a job already finished (cancelled while it waited
// here), and dead-letters a job whose workers died max_deliveries times.
// The start token names this delivery (consumer life and entry): the same
// start again, after its reply was lost, runs without counting a delivery.
// KEYS: stream, job hash, dead-letter stream
// ARGV: group, entry id, consumer, max deliveries, job id, result ttl ms, start token
// -> {verdict, TIME s, TIME us, deliveries, handler, payload, content type,
//     idempotency key}; verdict: run | not_owner | finished | cancelled | gone | dead
inline constexpr const char* start_script = R"lua(
local t = redis.call('TIME')
local function answer(v, n) return {v, t[1], t[2], n or 0} end
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1, ARGV[3])
if #p == 0 then return answer('not_owner') end
local f = redis.call('HMGET', KEYS[2], 'state', 'deliveries', 'handler', 'payload', 'content_type',
  'idempotency_key', 'cancel_requested', 'start_token')
if not f[1] then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  redis.call('XDEL', KEYS[1], ARGV[2])
  return answer('gone')
end
if f[1] ~= 'queued' and f[1] ~= 'running' then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  redis.call('XDEL', KEYS[1], ARGV[2])
  return answer('finished')
end
if f[7] == '1' then  -- a DELETE marked it while it ran on a daemon that then died
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  redis.call('XDEL', KEYS[1], ARGV[2])
  redis.call('HSET', KEYS[2], 'state', 'cancelled', 'cause', 'requested')
  redis.call('HDEL', KEYS[2], 'payload')
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  return answer('cancelled')
end
local n = tonumber(f[2] or '0') or 0
if f[1] == 'running' and f[8] == ARGV[7] then  -- our start again: counted once
  return {'run', t[1], t[2], n, f[3] or '', f[4] or '', f[5] or '', f[6] or ''}
end
if n >= tonumber(ARGV[4]) then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  redis.call('XDEL', KEYS[1], ARGV[2])
  redis.call('XADD', KEYS[3], '*', 'id', ARGV[5], 'deliveries', tostring(n))
  redis.call('HSET', KEYS[2], 'state', 'dead', 'cause', 'max_deliveries')
  redis.call('HDEL', KEYS[2], 'payload')
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  return answer('dead', n)
end
redis.call('HSET', KEYS[2], 'state', 'running', 'deliveries', tostring(n + 1), 'consumer', ARGV[3],
  'start_token', ARGV[7])
return {'run', t[1], t[2], n + 1, f[3] or '', f[4] or '', f[5] or '', f[6] or ''}
)lua";

// A daemon's renewal: its name's lease, its live worker slots, and the idle
// time of every entry it still holds (so nobody reclaims them). Reports the
// entries whose job a DELETE marked, and those it no longer holds.
// KEYS: lease key, slots hash, stream, then one job hash per entry
// ARGV: group, consumer, token, renewal count, lease ms, slots, then the entries
// -> {'fenced'} (another process holds the name) |
//    {'ok', {cancel-marked entries}, {entries not held}, TIME s, TIME us,
//     backlog (entries not yet delivered), pending (delivered, not finished)}
inline constexpr const char* renew_script = R"lua(
local cur = redis.call('GET', KEYS[1])
if cur then
  local token = string.match(cur, '^(.*):%d+$')
  if token ~= ARGV[3] then return {'fenced'} end
end
redis.call('SET', KEYS[1], ARGV[3] .. ':' .. ARGV[4], 'PX', ARGV[5])
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], ARGV[2], ARGV[6] .. ':' .. tostring(now_ms + tonumber(ARGV[5])))
local marked, lost, deleted = {}, {}, {}
for i = 4, #KEYS do
  local entry = ARGV[i + 3]
  local p = redis.call('XPENDING', KEYS[3], ARGV[1], entry, entry, 1, ARGV[2])
  if #p == 1 then
    -- XCLAIM drops an entry deleted from the stream (and does not return it)
    if #redis.call('XCLAIM', KEYS[3], ARGV[1], ARGV[2], 0, entry, 'JUSTID') == 0 then
      table.insert(deleted, entry)
    end
    if redis.call('HGET', KEYS[i], 'cancel_requested') == '1' then table.insert(marked, entry) end
  else
    table.insert(lost, entry)
  end
end
local len = redis.call('XLEN', KEYS[3])
local pending = redis.call('XPENDING', KEYS[3], ARGV[1])[1]
return {'ok', marked, lost, t[1], t[2], len - pending, pending, deleted}
)lua";

// Drain: entries this consumer holds go back for immediate reclaim by the
// others: idle set far past any lease, a job this consumer life started
// queued again with its delivery uncounted (a drain is not a failed
// delivery). "Started by us" is the job's start token, so a start whose reply
// the drain cut off is uncounted too. A job started by a worker that died
// before stays as it is: that start counts.
// KEYS: stream, then one job hash per entry
// ARGV: group, consumer, idle ms, lease token, then the entry ids
// -> how many were handed back
inline constexpr const char* hand_back_script = R"lua(
local n = 0
for i = 2, #KEYS do
  local entry = ARGV[i + 3]
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], entry, entry, 1, ARGV[2])
  if #p == 1 then
    local f = redis.call('HMGET', KEYS[i], 'state', 'start_token')
    if f[1] == 'running' and f[2] == ARGV[4] .. '/' .. entry then
      redis.call('HINCRBY', KEYS[i], 'deliveries', -1)
      redis.call('HSET', KEYS[i], 'state', 'queued')
      redis.call('HDEL', KEYS[i], 'start_token')
    end
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, entry, 'IDLE', ARGV[3], 'JUSTID')
    n = n + 1
  end
end
return n
)lua";

// A daemon leaving the fleet: its lease and its slots, if still its own.
// KEYS: lease key, slots hash   ARGV: consumer, token
inline constexpr const char* release_script = R"lua(
local cur = redis.call('GET', KEYS[1])
if cur and string.match(cur, '^(.*):%d+$') == ARGV[2] then
  redis.call('DEL', KEYS[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 1
end
return 0
)lua";

}  // namespace hourglass::fleet::detail
