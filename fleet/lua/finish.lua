-- finish: each job's end of an attempt, for a batch of jobs. The first
-- finish wins: either the job's outcome, kept for the result TTL, or (a
-- failed attempt the consumer asks to retry) a retry scheduled in the
-- delayed set. Either way its stream entry is acknowledged and deleted (so
-- the stream holds only live work and never needs MAXLEN), all of the
-- batch's at once; the mean run time moves 1/16 towards each run's, written
-- once. A later finish is only counted (stats duplicate_outcomes).
--
-- A retry is checked here against the job's overall deadline on the
-- broker's clock: due = TIME + delay must leave need_us (the fleet's
-- predicted wait plus the job's minimum budget) before deadline_us, or the
-- job's outcome is the fallback fields instead (deadline_exceeded, stage
-- retry). A scheduled retry starts a new attempt: attempt + 1, deliveries 0
-- (a worker's death is a delivery, not an attempt), the ended attempt
-- appended to the job's `attempts` (a JSON array of the last 10). A job
-- with a retry policy that ends after it ran appends its last attempt too:
-- every attempt is listed.
--
-- A parent's run that ends by waiting for its children (kind 'wait') frees
-- its entry and waits in state 'waiting': resumed at once when its rule is
-- met already, else by the finish of the child that meets it (every child's
-- first outcome counts down its parent, hg:{Q}:job:<parent>, the same slot),
-- or by promote at its wake time (deadline_us - keep_us, in the delayed
-- set). Resumed, it goes back on the stream with woke_by 'children' (or
-- 'deadline'), wakes + 1, deliveries 0, its attempt unchanged.
--
-- A run that ends waiting for a person's signal (rule 'signal:<name>', its
-- keep_us the wait's own limit) waits in state 'waiting' with
-- human_since_us = TIME and its limit in the delayed set: signal.lua
-- resumes it (its deadline moved on by the wait), promote ends it at the
-- limit (deadline_exceeded, stage human_wait). Children do not resume it.
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2] stats_key       hg:{Q}:stats
-- KEYS[3] delayed_key     hg:{Q}:delayed
-- KEYS[3 + i]             job i's hg:{Q}:job:<id> (i = 1..n)
-- ARGV[1] group           the consumer group, 'hourglass'
-- ARGV[2] result_ttl_ms   how long an outcome is kept
-- ARGV[3] token           the finishing consumer's lease token ('' none): the
--                         same finish sent again (its reply was lost) is
--                         answered as the first time, not as a duplicate
-- then, per job in KEYS' order:
--   entry                 the stream entry that ran it; '' any. A finish of an
--                         earlier attempt's entry (a retry is scheduled or
--                         runs now) is a duplicate
--   run_us                its run time in microseconds; '-1': it did not run
--   kind                  'final': record the fields; 'retry': five more follow; 'wait': two
--   [rule, keep_us]       wait: 'all', 'first:<n>' or 'first_success', and what is kept before
--                         the deadline; or 'signal:<name>' and the person's wait's limit
--   [delay_us]            retry: the backoff before the next attempt
--   [need_us]             retry: predicted wait + minimum budget, due before the deadline
--   [error, message, run_ms]  retry: the failed attempt, for `attempts`
--   field_count           how many ARGV follow: the outcome's field/value
--                         pairs (a final 'state' among them)
--   field, value, ...
--
-- Reply: one status string per job, in order
--   'first'      recorded as its outcome (a retry's fallback included: 'no_budget' says so)
--   'scheduled'  a retry: waits in the delayed set
--   'no_budget'  a retry that would come too late: the fallback recorded
--   'cancelled'  a retry of a job a DELETE marked while it ran: recorded
--                cancelled (cause requested) instead, never retried
--   'waiting'    a wait: it waits for its children (or its wake time)
--   'resumed'    a wait already over: back on the stream
--   'duplicate'  an outcome (or a retry) is recorded already: counted, nothing else
--   'unknown'    no job hash: nothing written
-- then, when a parent this finish resumed had children still unfinished,
-- one more element: the handlers of those cancelled here (cause parent;
-- running ones are only marked: their daemons record them)
local stream_key = KEYS[1]
local stats_key = KEYS[2]
local delayed_key = KEYS[3]
local group = ARGV[1]
local result_ttl_ms = ARGV[2]
local token = ARGV[3]
local max_attempts_listed = 10
local job_prefix = string.sub(stream_key, 1, #stream_key - #'stream') .. 'job:'

-- Appends `attempt` to job_key's `attempts` (the last max_attempts_listed).
local function list_attempt(job_key, attempts, attempt)
  local list = {}
  if attempts and attempts ~= '' then list = cjson.decode(attempts) end
  table.insert(list, attempt)
  while #list > max_attempts_listed do table.remove(list, 1) end
  redis.call('HSET', job_key, 'attempts', cjson.encode(list))
end

-- @include family
-- @include admission
local q = {stream = stream_key, group = group, delayed = delayed_key, result_ttl_ms = result_ttl_ms}
q.prefix = string.sub(stream_key, 1, #stream_key - #'stream')

-- Schedules job_key's next attempt if it fits before its deadline; false: it does not.
local function schedule_retry(job_key, delay_us, need_us, ended)
  local f = redis.call('HMGET', job_key, 'id', 'deadline_us', 'attempt', 'attempts')
  local job_id, deadline_us, attempt, attempts = f[1], tonumber(f[2] or ''), tonumber(f[3] or '1') or 1, f[4]
  local due_us = broker_now_us() + delay_us
  if deadline_us and not admits(deadline_us - due_us, 0, need_us) then return false end
  local due_ms = string.format('%.0f', math.ceil(due_us / 1000))  -- never early; every digit
  list_attempt(job_key, attempts, ended)
  redis.call('HSET', job_key, 'state', states.scheduled, 'due_ms', due_ms, 'attempt', tostring(attempt + 1),
    'deliveries', '0', 'entry', '')
  redis.call('HDEL', job_key, 'start_token', 'woke_by')  -- the next attempt starts afresh
  redis.call('ZADD', delayed_key, due_ms, job_id)
  return true
end

-- Children cancelled here because their parent's wait ended without them
-- (their handlers, for the reply: no daemon's run ends them).
local cancelled_here = {}

-- A job with children (`children`: its count of them) keeps them listed as
-- long as its own outcome: a wait made the set permanent.
local function expire_children(job_key, children)
  if not children then return end
  local id = string.sub(job_key, #job_prefix + 1)
  redis.call('PEXPIRE', string.sub(job_prefix, 1, #job_prefix - #'job:') .. 'children:' .. id, result_ttl_ms)
end

-- A job's first outcome counts down its parent's wait (when it has one);
-- the child that meets the parent's rule resumes it.
local function child_finished(job_key, ok)
  local parent = count_down_parent(q, job_key, ok)
  if parent and wait_over(job_prefix .. parent) then
    resume_waiting(q, job_prefix .. parent, 'children', cancelled_here)
  end
end

-- A parent's run ended waiting: its wake time in the delayed set (none
-- without a deadline), unless its rule is met already.
local function start_wait(job_key, rule, keep_us)
  redis.call('HSET', job_key, 'state', states.waiting, 'wait_rule', rule, 'entry', '')
  redis.call('HDEL', job_key, 'start_token')
  -- its children stay listed however long it waits (until its own outcome's TTL)
  redis.call('PERSIST', string.sub(job_prefix, 1, #job_prefix - #'job:') .. 'children:' .. redis.call('HGET', job_key, 'id'))
  if string.sub(rule, 1, 7) == 'signal:' then  -- a person's wait: its own limit from now; the budget stands still
    local limit_ms = string.format('%.0f', math.ceil((broker_now_us() + keep_us) / 1000))
    redis.call('HSET', job_key, 'human_since_us', string.format('%.0f', broker_now_us()), 'wake_ms', limit_ms)
    redis.call('ZADD', delayed_key, limit_ms, redis.call('HGET', job_key, 'id'))
    return 'waiting'
  end
  if wait_over(job_key) then
    resume_waiting(q, job_key, 'children', cancelled_here)
    return 'resumed'
  end
  local f = redis.call('HMGET', job_key, 'id', 'deadline_us')
  local deadline_us = tonumber(f[2] or '')
  if deadline_us then
    if deadline_us - keep_us <= broker_now_us() then  -- its wake time has come already
      resume_waiting(q, job_key, 'deadline', cancelled_here)
      return 'resumed'
    end
    local wake_ms = string.format('%.0f', math.ceil((deadline_us - keep_us) / 1000))
    redis.call('ZADD', delayed_key, wake_ms, f[1])
    redis.call('HSET', job_key, 'wake_ms', wake_ms)
  end
  return 'waiting'
end

local out, entries, runs = {}, {}, {}
local duplicates = 0
-- The fleet's totals (stats): 'finished:<state>', 'expired:<stage>',
-- 'retries'; added once for the batch, in the write of the mean run time.
local tally, tally_names = {}, {}
local function count(name)
  if not tally[name] then
    tally[name] = 0
    table.insert(tally_names, name)
  end
  tally[name] = tally[name] + 1
end
local a = 4
for i = 4, #KEYS do
  local job_key = KEYS[i]
  local ran_entry = ARGV[a]
  local run_us = tonumber(ARGV[a + 1])
  local kind = ARGV[a + 2]
  local retry, wait = nil, nil
  a = a + 3
  if kind == 'wait' then
    wait = {ARGV[a], tonumber(ARGV[a + 1]) or 0}
    a = a + 2
  elseif kind == 'retry' then
    retry = {tonumber(ARGV[a]), tonumber(ARGV[a + 1]),
      {outcome = 'error', error = ARGV[a + 2], message = ARGV[a + 3], run_ms = tonumber(ARGV[a + 4]) or 0}}
    a = a + 5
  end
  local field_count = tonumber(ARGV[a])
  local first_field = a + 1
  a = first_field + field_count
  -- parent: whose wait its outcome counts for; children: whether it has a children set to expire with it
  local f = redis.call('HMGET', job_key, 'state', 'entry', 'max_attempts', 'attempts', 'finish_token', 'finish_reply',
    'cancel_requested', 'cancel_cause', 'parent', 'children')
  local state, entry, max_attempts, attempts = f[1], f[2], f[3], f[4]
  local this_finish = ''
  if token ~= '' and ran_entry ~= '' then this_finish = token .. '/' .. ran_entry end
  if not state then
    out[i - 3] = 'unknown'
  elseif this_finish ~= '' and f[5] == this_finish then
    out[i - 3] = f[6]  -- ours, sent again: its first answer
  elseif (state ~= states.queued and state ~= states.running) or (ran_entry ~= '' and ran_entry ~= entry) then
    duplicates = duplicates + 1
    out[i - 3] = 'duplicate'
  else
    if entry and entry ~= '' then table.insert(entries, entry) end
    if run_us >= 0 then table.insert(runs, run_us) end
    if (retry or wait) and f[7] == '1' then
      redis.call('HSET', job_key, 'state', states.cancelled, 'cause', f[8] or 'requested', 'payload', '')
      redis.call('PEXPIRE', job_key, result_ttl_ms)
      expire_children(job_key, f[10])
      if retry then list_attempt(job_key, attempts, retry[3]) end
      out[i - 3] = 'cancelled'
      count('finished:cancelled')
      child_finished(job_key, false)
    elseif wait then
      out[i - 3] = start_wait(job_key, wait[1], wait[2])
    elseif retry and schedule_retry(job_key, retry[1], retry[2], retry[3]) then
      out[i - 3] = 'scheduled'
      count('retries')
    else
      out[i - 3] = retry and 'no_budget' or 'first'
      local st, stage = '', ''
      for k = first_field, a - 2, 2 do
        if ARGV[k] == 'state' then st = ARGV[k + 1] elseif ARGV[k] == 'stage' then stage = ARGV[k + 1] end
      end
      if st == states.deadline_exceeded then count('expired:' .. stage) else count('finished:' .. st) end
      -- The payload emptied in the same write: its memory goes, the field stays.
      if this_finish ~= '' then  -- and the answer for this finish sent again, in that one write too
        redis.call('HSET', job_key, 'payload', '', 'finish_token', this_finish, 'finish_reply', out[i - 3],
          unpack(ARGV, first_field, a - 1))
      else
        redis.call('HSET', job_key, 'payload', '', unpack(ARGV, first_field, a - 1))
      end
      -- stopped by a cancel its parent's cancel brought: that is its cause
      if st == states.cancelled and f[8] then redis.call('HSET', job_key, 'cause', f[8]) end
      redis.call('PEXPIRE', job_key, result_ttl_ms)
      expire_children(job_key, f[10])
      child_finished(job_key, st == states.ok)
      if max_attempts and max_attempts ~= '1' and run_us >= 0 then
        local last = {run_ms = run_us / 1000}
        for k = first_field, a - 2, 2 do
          local name = ARGV[k]
          if name == 'state' then last.outcome = ARGV[k + 1] end
          if name == 'stage' or name == 'error' or name == 'message' then last[name] = ARGV[k + 1] end
        end
        if retry then  -- it failed; the job then ran out of time for another
          last.outcome = 'error'
          last.stage = nil
        end
        list_attempt(job_key, attempts, last)
      end
    end
    if this_finish ~= '' and out[i - 3] ~= 'first' and out[i - 3] ~= 'no_budget' then
      redis.call('HSET', job_key, 'finish_token', this_finish, 'finish_reply', out[i - 3])
    end
  end
end
if #entries > 0 then
  redis.call('XACK', stream_key, group, unpack(entries))
  redis.call('XDEL', stream_key, unpack(entries))
end
if duplicates > 0 then redis.call('HINCRBY', stats_key, 'duplicate_outcomes', duplicates) end
for _ = 1, #cancelled_here do count('finished:cancelled') end
if #runs > 0 or #tally_names > 0 then
  local read = redis.call('HMGET', stats_key, 'mean_run_us', unpack(tally_names))
  local write = {}
  if #runs > 0 then
    -- EWMA (alpha 1/16) of run times, for the fleet's predicted wait.
    local mean = tonumber(read[1] or '-1') or -1
    for _, run in ipairs(runs) do
      if mean < 0 then mean = run else mean = mean + (run - mean) / 16 end
    end
    write = {'mean_run_us', tostring(mean)}
  end
  for k, name in ipairs(tally_names) do
    table.insert(write, name)
    table.insert(write, string.format('%.0f', (tonumber(read[k + 1] or '0') or 0) + tally[name]))
  end
  redis.call('HSET', stats_key, unpack(write))
end
if #cancelled_here > 0 then out[#out + 1] = cancelled_here end
return out
