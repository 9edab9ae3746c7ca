-- start: the last check before workers start delivered jobs, atomic with
-- marking them running; a batch of them, each judged on its own. Refuses an
-- entry this consumer no longer holds (it was reclaimed by another), a job
-- already finished (cancelled while it waited), and dead-letters a job whose
-- workers died max_deliveries times. The start token names the delivery
-- (consumer life and entry): the same start again, after its reply was lost,
-- runs without counting a delivery.
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2] dead_key        hg:{Q}:dead
-- KEYS[3] stats_key       hg:{Q}:stats
-- KEYS[3 + i]             job i's hg:{Q}:job:<id> (i = 1..n)
-- ARGV[1] group           the consumer group, 'hourglass'
-- ARGV[2] consumer        this daemon's consumer name
-- ARGV[3] max_deliveries  starts allowed before the job is dead-lettered
-- ARGV[4] result_ttl_ms   how long an outcome recorded here is kept
-- ARGV[5] dead_ttl_ms     how long a dead-lettered job is kept (payload and all, for a replay)
-- ARGV[6] dead_max        the dead list's bound: the oldest entries beyond it are dropped (counted)
-- ARGV[7 + 3(i-1)] ...    job i's entry id, job id (32 hex digits) and start
--                         token ('<lease token>/<entry id>')
--
-- Reply: {TIME s, TIME us, answer 1, ..., answer n}, TIME as strings (the
-- broker's TIME); answer i is {verdict, deliveries} with verdict
--   'not_owner' | 'gone' | 'finished' | 'cancelled' | 'dead', or eleven elements
--   {'run', deliveries, handler, payload, content_type, idempotency_key,
--    attempt, max_attempts, retry_base_us, retry_cap_us, deadline_us}
-- deliveries an integer (starts so far in this attempt, this one included),
-- the rest strings ('' when missing: a job without a retry policy).
-- A job that ran out of deliveries is dead-lettered whatever attempts its
-- retry policy has left: its workers died, its handler never failed.
local stream_key = KEYS[1]
local dead_key = KEYS[2]
local stats_key = KEYS[3]
local group = ARGV[1]
local consumer = ARGV[2]
local max_deliveries = tonumber(ARGV[3])
local result_ttl_ms = ARGV[4]
local dead_ttl_ms = ARGV[5]
local dead_max = ARGV[6]
local first_job_arg = 7
local max_starts_listed = 10
local n = (#ARGV - first_job_arg + 1) / 3

local t = redis.call('TIME')
local now_ms = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))  -- started_ms, the timeline's
-- What this consumer holds among the batch's entries, in one read.
local function id_less(a, b)
  local ams, aseq = string.match(a, '^(%d+)-(%d+)$')
  local bms, bseq = string.match(b, '^(%d+)-(%d+)$')
  if ams ~= bms then return tonumber(ams) < tonumber(bms) end
  return tonumber(aseq) < tonumber(bseq)
end
local lo, hi = ARGV[first_job_arg], ARGV[first_job_arg]
for i = 2, n do
  local e = ARGV[first_job_arg + 3 * (i - 1)]
  if id_less(e, lo) then lo = e end
  if id_less(hi, e) then hi = e end
end
local held = {}
for _, p in ipairs(redis.call('XPENDING', stream_key, group, lo, hi, 1000000, consumer)) do held[p[1]] = true end

local function acknowledged(entry)
  redis.call('XACK', stream_key, group, entry)
  redis.call('XDEL', stream_key, entry)
end

local out = {t[1], t[2]}
for i = 1, n do
  local a = first_job_arg + 3 * (i - 1)
  local entry, job_id, start_token = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local job_key = KEYS[3 + i]
  local answer
  if not held[entry] then
    answer = {'not_owner', 0}
  else
    local f = redis.call('HMGET', job_key, 'state', 'deliveries', 'handler', 'payload', 'content_type',
      'idempotency_key', 'cancel_requested', 'start_token', 'attempt', 'max_attempts', 'retry_base_us',
      'retry_cap_us', 'deadline_us', 'starts')
    local state, deliveries, handler, payload = f[1], f[2], f[3], f[4]
    local content_type, idempotency_key, cancel_requested, last_start_token = f[5], f[6], f[7], f[8]
    local function run(d)
      return {'run', d, handler or '', payload or '', content_type or '', idempotency_key or '', f[9] or '',
        f[10] or '', f[11] or '', f[12] or '', f[13] or ''}
    end
    local d = tonumber(deliveries or '0') or 0
    if not state then
      acknowledged(entry)
      answer = {'gone', 0}
    elseif state ~= 'queued' and state ~= 'running' then
      acknowledged(entry)
      answer = {'finished', 0}
    elseif cancel_requested == '1' then  -- a DELETE marked it while it ran on a daemon that then died
      acknowledged(entry)
      redis.call('HSET', job_key, 'state', 'cancelled', 'cause', 'requested')
      redis.call('HDEL', job_key, 'payload')
      redis.call('PEXPIRE', job_key, result_ttl_ms)
      redis.call('HINCRBY', stats_key, 'finished:cancelled', 1)  -- the fleet's totals
      answer = {'cancelled', 0}
    elseif state == 'running' and last_start_token == start_token then  -- our start again: counted once
      answer = run(d)
    elseif d >= max_deliveries then
      acknowledged(entry)
      -- kept whole, payload and all, for dead_ttl: an operator may replay it (dead.lua)
      local dead_entry = redis.call('XADD', dead_key, '*', 'id', job_id, 'deliveries', tostring(d))
      redis.call('HSET', job_key, 'state', 'dead', 'cause', 'max_deliveries', 'dead_entry', dead_entry)
      redis.call('PEXPIRE', job_key, dead_ttl_ms)
      local dropped = redis.call('XTRIM', dead_key, 'MAXLEN', dead_max)
      if dropped > 0 then redis.call('HINCRBY', stats_key, 'dead_dropped', dropped) end
      redis.call('HINCRBY', stats_key, 'finished:dead', 1)  -- the fleet's totals (finish.lua keeps the rest)
      answer = {'dead', d}
    else
      -- starts: '<ms> <consumer>' a line, the last max_starts_listed (the timeline's deliveries)
      local starts = (f[14] or '') .. now_ms .. ' ' .. consumer .. '\n'
      local _, lines = string.gsub(starts, '\n', '')
      if lines > max_starts_listed then starts = string.sub(starts, string.find(starts, '\n', 1, true) + 1) end
      redis.call('HSET', job_key, 'state', 'running', 'deliveries', tostring(d + 1), 'consumer', consumer,
        'start_token', start_token, 'started_ms', now_ms, 'starts', starts)
      answer = run(d + 1)
    end
  end
  out[2 + i] = answer
end
return out
