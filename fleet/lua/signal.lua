-- signal: a person's signal for a job waiting for it (its run ended with
-- a wait for 'signal:<name>', finish.lua). Delivered once: the job goes
-- back on the stream, woke_by 'signal', the payload beside it, and its
-- overall deadline moved on by the time it waited, so it has the machine
-- budget it had left when it began to wait; its limit leaves the delayed
-- set. Any other signal, or one for a job not waiting, changes nothing.
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2] job_key         hg:{Q}:job:<id>
-- KEYS[3] delayed_key     hg:{Q}:delayed
-- ARGV[1] name            the signal's name
-- ARGV[2] payload         its payload (small: the daemon bounds it)
-- ARGV[3] result_ttl_ms   how long an outcome recorded here is kept
--
-- A signal that comes after the wait's limit (promote has not ended it
-- yet) is not delivered: the job ends here as promote would end it,
-- deadline_exceeded/human_wait, and the reply says so ('expired').
--
-- Reply: {'delivered'}, {'not_waiting', state, wait_rule ('' none)},
-- {'not_waiting', 'deadline_exceeded', wait_rule, 'expired'} or {'unknown'} (no job hash)
local stream_key = KEYS[1]
local job_key = KEYS[2]
local delayed_key = KEYS[3]
local name = ARGV[1]
local payload = ARGV[2]

-- @include family
local q = {stream = stream_key, delayed = delayed_key, result_ttl_ms = ARGV[3]}
q.prefix = string.sub(stream_key, 1, #stream_key - #'stream')

local f = redis.call('HMGET', job_key, 'state', 'wait_rule', 'id', 'handler', 'freshness_ms', 'deadline_us',
  'human_since_us', 'human_waited_us', 'wake_ms')
local state, rule = f[1], f[2]
if not state then return {'unknown'} end
if state ~= states.waiting or rule ~= 'signal:' .. name then return {'not_waiting', state, rule or ''} end

local now_us = broker_now_us()
local waited = math.max(now_us - (tonumber(f[7] or '') or now_us), 0)
if f[9] and tonumber(f[9]) * 1000 <= now_us then  -- past the wait's limit: too late
  redis.call('ZREM', delayed_key, f[3])
  end_human_wait(q, job_key)
  redis.call('HINCRBY', q.prefix .. 'stats', 'expired:human_wait', 1)
  return {'not_waiting', states.deadline_exceeded, rule, 'expired'}
end
local due_ms = string.format('%.0f', math.floor(now_us / 1000))
-- its minimum was judged at its admission: what is left is its own
local fields = {'id', f[3], 'handler', f[4], 'freshness_ms', f[5], 'min_budget_ms', '0', 'due_ms', due_ms}
if f[6] and f[6] ~= '' then
  local deadline_us = string.format('%.0f', tonumber(f[6]) + waited)
  table.insert(fields, 'deadline_us')
  table.insert(fields, deadline_us)
  redis.call('HSET', job_key, 'deadline_us', deadline_us)
end
redis.call('ZREM', delayed_key, f[3])
local entry = redis.call('XADD', stream_key, '*', unpack(fields))
redis.call('HSET', job_key, 'state', states.queued, 'entry', entry, 'woke_by', 'signal', 'signal_payload', payload,
  'deliveries', '0', 'due_ms', due_ms, 'human_waited_us', string.format('%.0f', (tonumber(f[8] or '0') or 0) + waited))
redis.call('HDEL', job_key, 'human_since_us', 'wake_ms')
redis.call('HINCRBY', job_key, 'wakes', 1)
return {'delivered'}
