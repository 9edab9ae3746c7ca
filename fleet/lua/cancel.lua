-- cancel (DELETE): a queued job is finished as cancelled on the spot (its
-- entry, delivered or not, is acknowledged and deleted), and so is a
-- scheduled one (out of the delayed set); a running one is marked, and the
-- daemon running it stops it at its next lease renewal.
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2] job_key         hg:{Q}:job:<id>
-- KEYS[3] delayed_key     hg:{Q}:delayed
-- ARGV[1] group           the consumer group, 'hourglass'
-- ARGV[2] result_ttl_ms   how long the outcome is kept
--
-- Reply: a status string
--   'cancelled'  it was queued or scheduled: state cancelled, cause requested, payload dropped, TTL
--   'marked'     it is running: cancel_requested = 1, nothing else
--   'finished'   an outcome is recorded already: nothing written
--   'unknown'    no job hash: nothing written
local stream_key = KEYS[1]
local job_key = KEYS[2]
local delayed_key = KEYS[3]
local group = ARGV[1]
local result_ttl_ms = ARGV[2]

local state = redis.call('HGET', job_key, 'state')
if not state then return 'unknown' end
if state == 'running' then
  redis.call('HSET', job_key, 'cancel_requested', '1')
  return 'marked'
end
if state == 'scheduled' then
  redis.call('ZREM', delayed_key, redis.call('HGET', job_key, 'id'))
elseif state == 'queued' then
  local entry = redis.call('HGET', job_key, 'entry')
  redis.call('XACK', stream_key, group, entry)
  redis.call('XDEL', stream_key, entry)
else
  return 'finished'
end
redis.call('HSET', job_key, 'state', 'cancelled', 'cause', 'requested', 'cancel_requested', '1')
redis.call('HDEL', job_key, 'payload')
redis.call('PEXPIRE', job_key, result_ttl_ms)
-- the fleet's totals (stats, beside the stream: the queue's hash slot)
redis.call('HINCRBY', string.sub(stream_key, 1, #stream_key - #'stream') .. 'stats', 'finished:cancelled', 1)
return 'cancelled'
