-- finish: each job's one recorded outcome, for a batch of jobs. The first
-- finish wins and is kept for the result TTL; its stream entry is
-- acknowledged and deleted (so the stream holds only live work and never
-- needs MAXLEN), all of the batch's at once; the payload is emptied; the
-- mean run time moves 1/16 towards each run's, written once. A later finish
-- is only counted (stats duplicate_outcomes).
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2] stats_key       hg:{Q}:stats
-- KEYS[2 + i]             job i's hg:{Q}:job:<id> (i = 1..n)
-- ARGV[1] group           the consumer group, 'hourglass'
-- ARGV[2] result_ttl_ms   how long an outcome is kept
-- then, per job in KEYS' order:
--   run_us                its run time in microseconds; '-1': it did not run
--   field_count           how many ARGV follow: the outcome's field/value
--                         pairs (a final 'state' among them)
--   field, value, ...
--
-- Reply: one status string per job, in order
--   'first'      recorded
--   'duplicate'  an outcome is recorded already: counted, nothing else
--   'unknown'    no job hash: nothing written
local stream_key = KEYS[1]
local stats_key = KEYS[2]
local group = ARGV[1]
local result_ttl_ms = ARGV[2]

local out, entries, runs = {}, {}, {}
local duplicates = 0
local a = 3
for i = 3, #KEYS do
  local job_key = KEYS[i]
  local run_us = tonumber(ARGV[a])
  local field_count = tonumber(ARGV[a + 1])
  local first_field = a + 2
  a = first_field + field_count
  local f = redis.call('HMGET', job_key, 'state', 'entry')
  local state, entry = f[1], f[2]
  if not state then
    out[i - 2] = 'unknown'
  elseif state ~= 'queued' and state ~= 'running' then
    duplicates = duplicates + 1
    out[i - 2] = 'duplicate'
  else
    -- The payload emptied in the same write: its memory goes, the field stays.
    redis.call('HSET', job_key, 'payload', '', unpack(ARGV, first_field, a - 1))
    redis.call('PEXPIRE', job_key, result_ttl_ms)
    if entry then table.insert(entries, entry) end
    if run_us >= 0 then table.insert(runs, run_us) end
    out[i - 2] = 'first'
  end
end
if #entries > 0 then
  redis.call('XACK', stream_key, group, unpack(entries))
  redis.call('XDEL', stream_key, unpack(entries))
end
if duplicates > 0 then redis.call('HINCRBY', stats_key, 'duplicate_outcomes', duplicates) end
if #runs > 0 then
  -- EWMA (alpha 1/16) of run times, for the fleet's predicted wait.
  local mean = tonumber(redis.call('HGET', stats_key, 'mean_run_us') or '-1') or -1
  for _, run in ipairs(runs) do
    if mean < 0 then mean = run else mean = mean + (run - mean) / 16 end
  end
  redis.call('HSET', stats_key, 'mean_run_us', tostring(mean))
end
return out
