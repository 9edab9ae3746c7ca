-- start: the last check before a worker starts a delivered job, atomic with
-- marking it running. Refuses an entry this consumer no longer holds (it was
-- reclaimed by another), a job already finished (cancelled while it waited),
-- and dead-letters a job whose workers died max_deliveries times. The start
-- token names this delivery (consumer life and entry): the same start again,
-- after its reply was lost, runs without counting a delivery.
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2] job_key         hg:{Q}:job:<id>
-- KEYS[3] dead_key        hg:{Q}:dead
-- ARGV[1] group           the consumer group, 'hourglass'
-- ARGV[2] entry           the stream entry id
-- ARGV[3] consumer        this daemon's consumer name
-- ARGV[4] max_deliveries  starts allowed before the job is dead-lettered
-- ARGV[5] job_id          32 hex digits
-- ARGV[6] result_ttl_ms   how long an outcome recorded here is kept
-- ARGV[7] start_token     '<lease token>/<entry id>'
--
-- Reply: {verdict, TIME s, TIME us, deliveries} with verdict (a string)
--   'not_owner' | 'gone' | 'finished' | 'cancelled' | 'dead', or eight elements
--   {'run', TIME s, TIME us, deliveries, handler, payload, content_type, idempotency_key}
-- TIME s and TIME us are strings (the broker's TIME), deliveries an integer
-- (starts so far, this one included), the rest strings ('' when missing).
local stream_key = KEYS[1]
local job_key = KEYS[2]
local dead_key = KEYS[3]
local group = ARGV[1]
local entry = ARGV[2]
local consumer = ARGV[3]
local max_deliveries = ARGV[4]
local job_id = ARGV[5]
local result_ttl_ms = ARGV[6]
local start_token = ARGV[7]

local t = redis.call('TIME')
local function answer(v, n) return {v, t[1], t[2], n or 0} end
local p = redis.call('XPENDING', stream_key, group, entry, entry, 1, consumer)
if #p == 0 then return answer('not_owner') end
local f = redis.call('HMGET', job_key, 'state', 'deliveries', 'handler', 'payload', 'content_type',
  'idempotency_key', 'cancel_requested', 'start_token')
local state, deliveries, handler, payload = f[1], f[2], f[3], f[4]
local content_type, idempotency_key, cancel_requested, last_start_token = f[5], f[6], f[7], f[8]
if not state then
  redis.call('XACK', stream_key, group, entry)
  redis.call('XDEL', stream_key, entry)
  return answer('gone')
end
if state ~= 'queued' and state ~= 'running' then
  redis.call('XACK', stream_key, group, entry)
  redis.call('XDEL', stream_key, entry)
  return answer('finished')
end
if cancel_requested == '1' then  -- a DELETE marked it while it ran on a daemon that then died
  redis.call('XACK', stream_key, group, entry)
  redis.call('XDEL', stream_key, entry)
  redis.call('HSET', job_key, 'state', 'cancelled', 'cause', 'requested')
  redis.call('HDEL', job_key, 'payload')
  redis.call('PEXPIRE', job_key, result_ttl_ms)
  return answer('cancelled')
end
local n = tonumber(deliveries or '0') or 0
if state == 'running' and last_start_token == start_token then  -- our start again: counted once
  return {'run', t[1], t[2], n, handler or '', payload or '', content_type or '', idempotency_key or ''}
end
if n >= tonumber(max_deliveries) then
  redis.call('XACK', stream_key, group, entry)
  redis.call('XDEL', stream_key, entry)
  redis.call('XADD', dead_key, '*', 'id', job_id, 'deliveries', tostring(n))
  redis.call('HSET', job_key, 'state', 'dead', 'cause', 'max_deliveries')
  redis.call('HDEL', job_key, 'payload')
  redis.call('PEXPIRE', job_key, result_ttl_ms)
  return answer('dead', n)
end
redis.call('HSET', job_key, 'state', 'running', 'deliveries', tostring(n + 1), 'consumer', consumer,
  'start_token', start_token)
return {'run', t[1], t[2], n + 1, handler or '', payload or '', content_type or '', idempotency_key or ''}
