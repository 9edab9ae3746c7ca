-- finish: the job's one recorded outcome. The first finish wins and is kept
-- for the result TTL; its stream entry is acknowledged and deleted (so the
-- stream holds only live work and never needs MAXLEN); the payload is
-- dropped; the mean run time moves 1/16 towards this run's. A later finish
-- is only counted (stats duplicate_outcomes).
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2] job_key         hg:{Q}:job:<id>
-- KEYS[3] stats_key       hg:{Q}:stats
-- ARGV[1] group           the consumer group, 'hourglass'
-- ARGV[2] result_ttl_ms   how long the outcome is kept
-- ARGV[3] run_us          its run time in microseconds; '-1': it did not run
-- ARGV[4], ARGV[5], ...   the outcome's field/value pairs (a final 'state' among them)
--
-- Reply: a status string
--   'first'      recorded
--   'duplicate'  an outcome is recorded already: counted, nothing else
--   'unknown'    no job hash: nothing written
local stream_key = KEYS[1]
local job_key = KEYS[2]
local stats_key = KEYS[3]
local group = ARGV[1]
local result_ttl_ms = ARGV[2]
local run_us = ARGV[3]
local first_field_arg = 4

local state = redis.call('HGET', job_key, 'state')
if not state then return 'unknown' end
if state ~= 'queued' and state ~= 'running' then
  redis.call('HINCRBY', stats_key, 'duplicate_outcomes', 1)
  return 'duplicate'
end
local entry = redis.call('HGET', job_key, 'entry')
redis.call('XACK', stream_key, group, entry)
redis.call('XDEL', stream_key, entry)
for i = first_field_arg, #ARGV, 2 do redis.call('HSET', job_key, ARGV[i], ARGV[i + 1]) end
redis.call('HDEL', job_key, 'payload')
redis.call('PEXPIRE', job_key, result_ttl_ms)
local run = tonumber(run_us)
if run >= 0 then
  -- EWMA (alpha 1/16) of run times, for the fleet's predicted wait.
  local mean = tonumber(redis.call('HGET', stats_key, 'mean_run_us') or '-1') or -1
  if mean < 0 then mean = run else mean = mean + (run - mean) / 16 end
  redis.call('HSET', stats_key, 'mean_run_us', tostring(mean))
end
return 'first'
