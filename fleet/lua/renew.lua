-- renew: a daemon's renewal, every lease/3: its name's lease, its live worker
-- slots, and the idle time of every entry it still holds (XCLAIM to itself,
-- JUSTID: no delivery counted), so nobody reclaims them. Reports the held
-- entries whose job a DELETE marked, those it no longer holds, and those
-- deleted from the stream (the loss alarm).
--
-- KEYS[1] lease_key       hg:{Q}:lease:<consumer>
-- KEYS[2] slots_key       hg:{Q}:slots
-- KEYS[3] stream_key      hg:{Q}:stream
-- KEYS[4] stats_key       hg:{Q}:stats
-- KEYS[5] delayed_key     hg:{Q}:delayed
-- KEYS[6] paused_key      hg:{Q}:paused
-- KEYS[7], KEYS[8], ...   hg:{Q}:job:<id>, one per held entry, in ARGV's order
-- ARGV[1] group           the consumer group, 'hourglass'
-- ARGV[2] consumer        this daemon's consumer name
-- ARGV[3] token           this process's lease token
-- ARGV[4] renewals        the renewal count, kept in the lease value
-- ARGV[5] lease_ms        the lease's time to live
-- ARGV[6] slots           this daemon's worker slots
-- ARGV[7], ARGV[8], ...   the held entry ids
--
-- Reply: {'fenced'} (another process holds the name: nothing written), or
-- twelve elements:
--   {'ok', marked, lost, TIME s, TIME us, backlog, pending, deleted, mean_run_us, live_slots, scheduled, paused}
--   marked   array of entry ids: held, and their job has cancel_requested = 1
--   lost     array of entry ids: no longer pending for this consumer
--   TIME s, TIME us  strings: the broker's TIME
--   backlog  integer: XLEN less the group's pending count
--   pending  integer: the group's pending count (delivered, not finished)
--   deleted  array of entry ids: held, but their data is gone from the stream
--   mean_run_us  integer: the fleet's mean run time (0 before any run)
--   live_slots   integer: the worker slots of every daemon whose lease is live
--   scheduled    integer: jobs in the delayed set (delayed jobs, retries and waits)
--   paused       string: since when the queue is paused (ms, the broker's clock); '' not paused
local lease_key = KEYS[1]
local slots_key = KEYS[2]
local stream_key = KEYS[3]
local stats_key = KEYS[4]
local delayed_key = KEYS[5]
local paused_key = KEYS[6]
local first_job_key = 7
local group = ARGV[1]
local consumer = ARGV[2]
local token = ARGV[3]
local renewals = ARGV[4]
local lease_ms = ARGV[5]
local slots = ARGV[6]
local first_entry_arg = 7

local cur = redis.call('GET', lease_key)
if cur then
  local holder = string.match(cur, '^(.*):%d+$')
  if holder ~= token then return {'fenced'} end
end
redis.call('SET', lease_key, token .. ':' .. renewals, 'PX', lease_ms)
-- @include fleet_wait
local now_us = broker_now_us()
local now_ms = math.floor(now_us / 1000)
redis.call('HSET', slots_key, consumer, slots .. ':' .. tostring(now_ms + tonumber(lease_ms)))
local marked, lost, deleted = {}, {}, {}
for i = first_job_key, #KEYS do
  local job_key = KEYS[i]
  local entry = ARGV[first_entry_arg + i - first_job_key]
  local p = redis.call('XPENDING', stream_key, group, entry, entry, 1, consumer)
  if #p == 1 then
    -- XCLAIM drops an entry deleted from the stream (and does not return it)
    if #redis.call('XCLAIM', stream_key, group, consumer, 0, entry, 'JUSTID') == 0 then
      table.insert(deleted, entry)
    end
    if redis.call('HGET', job_key, 'cancel_requested') == '1' then table.insert(marked, entry) end
  else
    table.insert(lost, entry)
  end
end
local counts = read_fleet_counts(stream_key, group, stats_key, slots_key)
return {'ok', marked, lost, string.format('%d', math.floor(now_us / 1000000)), string.format('%d', now_us % 1000000),
  counts[1], counts[4], deleted, counts[2], counts[3], redis.call('ZCARD', delayed_key),
  redis.call('GET', paused_key) or ''}
