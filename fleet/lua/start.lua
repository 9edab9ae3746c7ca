-- start: the last check before workers start delivered jobs, atomic with
-- marking them running; a batch of them, each judged on its own. Refuses an
-- entry this consumer no longer holds (it was reclaimed by another), a job
-- already finished (cancelled while it waited), and dead-letters a job whose
-- workers died max_deliveries times. The start token names the delivery
-- (consumer life and entry): the same start again, after its reply was lost,
-- runs without counting a delivery.
--
-- Taken instead of given: a reader with free workers has the script read up
-- to `count` new entries itself (XREADGROUP '>', this consumer) and start
-- them in the same step, one round trip from the stream to its workers
-- instead of a read and then a start. A taken entry already too late to
-- start (its freshness from its entry id or due time, or its deadline, less
-- its minimum budget, on this TIME) is not started: answered 'late', its
-- expiry is the caller's to record. Its job key is hg:{Q}:job:<id> of the
-- entry's id field: not in KEYS, in the same hash slot.
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2] dead_key        hg:{Q}:dead
-- KEYS[3] stats_key       hg:{Q}:stats
-- KEYS[3 + i]             given: job i's hg:{Q}:job:<id> (i = 1..n)
-- ARGV[1] group           the consumer group, 'hourglass'
-- ARGV[2] consumer        this daemon's consumer name
-- ARGV[3] max_deliveries  starts allowed before the job is dead-lettered
-- ARGV[4] result_ttl_ms   how long an outcome recorded here is kept
-- ARGV[5] dead_ttl_ms     how long a dead-lettered job is kept (payload and all, for a replay)
-- ARGV[6] dead_max        the dead list's bound: the oldest entries beyond it are dropped (counted)
-- ARGV[7 + 3(i-1)] ...    given: job i's entry id, job id (32 hex digits) and
--                         start token ('<lease token>/<entry id>')
-- take: ARGV[7] 'take'    taken instead, with
-- take: ARGV[8] count     how many new entries at most
-- take: ARGV[9] lease_token  each start token is '<lease_token>/<entry id>'
-- take: ARGV[10] judge    '1': a late entry is not started; '0' (--policy fifo): every one is
--
-- Reply: {TIME s, TIME us, answer 1, ..., answer n}, TIME as strings (the
-- broker's TIME); taken, answer i is {entry id, {field, value, ...}, start
-- answer} (n: the entries read, 0 when none is new); given, the start answer.
-- A start answer is {verdict, deliveries} with verdict
--   'not_owner' | 'gone' | 'finished' | 'cancelled' | 'dead' | 'late' (taken only), or fifteen elements
--   {'run', deliveries, handler, payload, content_type, idempotency_key,
--    attempt, max_attempts, retry_base_us, retry_cap_us, deadline_us, woke_by,
--    wait_rule, signal_payload, retry_jitter} (woke_by, wait_rule, signal_payload
--    '' unless it resumes after a wait)
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
local taking = ARGV[first_job_arg] == 'take'

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_ms = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))  -- started_ms, the timeline's

-- The batch: each job's entry id, job id, start token and key, and (taken)
-- its entry's fields; `held`: the entries this consumer holds among them.
local jobs, held = {}, {}
if taking then
  local job_prefix = string.sub(stream_key, 1, #stream_key - #'stream') .. 'job:'
  local read = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', ARGV[first_job_arg + 1], 'STREAMS',
    stream_key, '>')
  local lease_token = ARGV[first_job_arg + 2]
  for _, e in ipairs(read and read[1][2] or {}) do
    local fields = {}
    for k = 1, #e[2], 2 do fields[e[2][k]] = e[2][k + 1] end
    local job_id = fields['id'] or ''
    table.insert(jobs, {entry = e[1], job_id = job_id, token = lease_token .. '/' .. e[1], key = job_prefix .. job_id,
      raw = e[2], fields = fields})
    held[e[1]] = true  -- just read: ours
  end
else
  for i = 1, (#ARGV - first_job_arg + 1) / 3 do
    local a = first_job_arg + 3 * (i - 1)
    table.insert(jobs, {entry = ARGV[a], job_id = ARGV[a + 1], token = ARGV[a + 2], key = KEYS[3 + i]})
  end
  -- What this consumer holds among the batch's entries, in one read.
  local function id_less(a, b)
    local ams, aseq = string.match(a, '^(%d+)-(%d+)$')
    local bms, bseq = string.match(b, '^(%d+)-(%d+)$')
    if ams ~= bms then return tonumber(ams) < tonumber(bms) end
    return tonumber(aseq) < tonumber(bseq)
  end
  local lo, hi = jobs[1].entry, jobs[1].entry
  for i = 2, #jobs do
    local e = jobs[i].entry
    if id_less(e, lo) then lo = e end
    if id_less(hi, e) then hi = e end
  end
  for _, p in ipairs(redis.call('XPENDING', stream_key, group, lo, hi, 1000000, consumer)) do held[p[1]] = true end
end

-- A taken entry too late to start, as the consumer judges one at delivery:
-- what is left of its freshness (counted from its due time, else its entry
-- id) or of its deadline is less than its minimum budget (at least 1 us).
local function late(job)
  if not taking or ARGV[first_job_arg + 3] ~= '1' then return false end
  local f = job.fields
  local need = math.max((tonumber(f['min_budget_ms'] or '0') or 0) * 1000, 1)
  local fresh = tonumber(f['freshness_ms'] or '-1') or -1
  if fresh >= 0 then
    local from_ms = tonumber(f['due_ms'] or '') or tonumber(string.match(job.entry, '^(%d+)'))
    if fresh * 1000 - math.max(now_us - from_ms * 1000, 0) < need then return true end
  end
  local deadline_us = tonumber(f['deadline_us'] or '')
  return deadline_us ~= nil and deadline_us - now_us < need
end

-- @include family
local q = {stream = stream_key, group = group, result_ttl_ms = result_ttl_ms}
q.prefix = string.sub(stream_key, 1, #stream_key - #'stream')
q.delayed = q.prefix .. 'delayed'

local function acknowledged(entry)
  redis.call('XACK', stream_key, group, entry)
  redis.call('XDEL', stream_key, entry)
end

local out = {t[1], t[2]}
for i, job in ipairs(jobs) do
  local entry, job_id, start_token, job_key = job.entry, job.job_id, job.token, job.key
  local answer
  if not held[entry] then
    answer = {'not_owner', 0}
  elseif late(job) then
    answer = {'late', 0}
  else
    local f = redis.call('HMGET', job_key, 'state', 'deliveries', 'handler', 'payload', 'content_type',
      'idempotency_key', 'cancel_requested', 'start_token', 'attempt', 'max_attempts', 'retry_base_us',
      'retry_cap_us', 'deadline_us', 'starts', 'woke_by', 'wait_rule', 'signal_payload', 'retry_jitter')
    local state, deliveries, handler, payload = f[1], f[2], f[3], f[4]
    local content_type, idempotency_key, cancel_requested, last_start_token = f[5], f[6], f[7], f[8]
    local function run(d)
      return {'run', d, handler or '', payload or '', content_type or '', idempotency_key or '', f[9] or '',
        f[10] or '', f[11] or '', f[12] or '', f[13] or '', f[15] or '', f[16] or '', f[17] or '', f[18] or ''}
    end
    local d = tonumber(deliveries or '0') or 0
    if not state then
      acknowledged(entry)
      answer = {'gone', 0}
    elseif not unfinished(state) or state == states.scheduled or state == states.waiting then
      acknowledged(entry)
      answer = {'finished', 0}
    elseif cancel_requested == '1' then  -- a DELETE marked it while it ran on a daemon that then died
      acknowledged(entry)
      redis.call('HSET', job_key, 'state', states.cancelled, 'cause', 'requested')
      redis.call('HDEL', job_key, 'payload')
      redis.call('PEXPIRE', job_key, result_ttl_ms)
      redis.call('HINCRBY', stats_key, 'finished:cancelled', 1)  -- the fleet's totals
      count_down_and_wake(q, job_key, false)
      answer = {'cancelled', 0}
    elseif state == states.running and last_start_token == start_token then  -- our start again: counted once
      answer = run(d)
    elseif d >= max_deliveries then
      acknowledged(entry)
      -- kept whole, payload and all, for dead_ttl: an operator may replay it (dead.lua)
      local dead_entry = redis.call('XADD', dead_key, '*', 'id', job_id, 'deliveries', tostring(d))
      redis.call('HSET', job_key, 'state', states.dead, 'cause', 'max_deliveries', 'dead_entry', dead_entry)
      redis.call('PEXPIRE', job_key, dead_ttl_ms)
      local dropped = redis.call('XTRIM', dead_key, 'MAXLEN', dead_max)
      if dropped > 0 then redis.call('HINCRBY', stats_key, 'dead_dropped', dropped) end
      redis.call('HINCRBY', stats_key, 'finished:dead', 1)  -- the fleet's totals (finish.lua keeps the rest)
      count_down_and_wake(q, job_key, false)  -- a replay of it is not counted again
      answer = {'dead', d, dropped}
    else
      -- starts: '<ms> <consumer>' a line, the last max_starts_listed (the timeline's deliveries)
      local starts = (f[14] or '') .. now_ms .. ' ' .. consumer .. '\n'
      local _, lines = string.gsub(starts, '\n', '')
      if lines > max_starts_listed then starts = string.sub(starts, string.find(starts, '\n', 1, true) + 1) end
      redis.call('HSET', job_key, 'state', states.running, 'deliveries', tostring(d + 1), 'consumer', consumer,
        'start_token', start_token, 'started_ms', now_ms, 'starts', starts)
      answer = run(d + 1)
    end
  end
  if taking then out[2 + i] = {entry, job.raw, answer} else out[2 + i] = answer end
end
return out
