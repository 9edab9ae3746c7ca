-- A job's family on the broker (its parent's wait, its children): the rules
-- of every script that ends, cancels or resumes a job. The functions take
-- the queue's keys as `q`:
--   q.prefix        'hg:{Q}:' (job hashes are q.prefix .. 'job:' .. id)
--   q.stream        hg:{Q}:stream      q.group  the consumer group
--   q.delayed       hg:{Q}:delayed     q.result_ttl_ms  how long an outcome is kept
-- @include clock
-- @include states

-- Whether a waiting parent's rule is met by its children's outcomes so far.
-- A person's wait ('signal:<name>') is met by its signal, not its children.
local function wait_over(job_key)
  local f = redis.call('HMGET', job_key, 'wait_rule', 'children', 'children_done', 'children_ok')
  local rule = f[1] or 'all'
  if string.sub(rule, 1, 7) == 'signal:' then return false end
  local total, done, ok = tonumber(f[2] or '0') or 0, tonumber(f[3] or '0') or 0, tonumber(f[4] or '0') or 0
  if rule == 'first_success' then return ok >= 1 or done >= total end
  local n = tonumber(string.match(rule, '^first:(%d+)$') or '')
  if n then return done >= math.min(n, total) end
  return done >= total
end

-- A job's first outcome counts down its parent's wait, once per child
-- whatever ends it again (a dead child replayed): the parent's counts stay
-- true. Returns the parent's id when it waits (for the caller to resume it,
-- or to put it due), else nil.
local function count_down_parent(q, job_key, ok)
  local parent = redis.call('HGET', job_key, 'parent')
  if not parent or parent == '' then return nil end
  local parent_key = q.prefix .. 'job:' .. parent
  if redis.call('EXISTS', parent_key) == 0 then return nil end
  if redis.call('HSETNX', job_key, 'counted_down', '1') == 0 then return nil end
  redis.call('HINCRBY', parent_key, 'children_done', 1)
  if ok then redis.call('HINCRBY', parent_key, 'children_ok', 1) end
  if redis.call('HGET', parent_key, 'state') == states.waiting then return parent end
  return nil
end

-- count_down_parent, a waiting parent put due at once in the delayed set,
-- where promote resumes it if its rule is met (or its wake time came).
local function count_down_and_wake(q, job_key, ok)
  local parent = count_down_parent(q, job_key, ok)
  if parent then redis.call('ZADD', q.delayed, 0, parent) end
end

-- One job cancelled for `cause` ('requested', 'parent'): 'cancelled' when
-- nothing of it runs (queued, scheduled, waiting: its outcome now),
-- 'marked' when it runs (its daemon stops it and records the outcome),
-- 'finished' or 'unknown' (nothing done).
local function cancel_job(q, key, cause)
  local state = redis.call('HGET', key, 'state')
  if not state then return 'unknown' end
  if state == states.running then
    redis.call('HSET', key, 'cancel_requested', '1')
    if cause ~= 'requested' then redis.call('HSET', key, 'cancel_cause', cause) end
    return 'marked'
  end
  if not unfinished(state) then return 'finished' end
  local id = redis.call('HGET', key, 'id')
  if state == states.queued then
    local entry = redis.call('HGET', key, 'entry')
    redis.call('XACK', q.stream, q.group, entry)
    redis.call('XDEL', q.stream, entry)
  else
    redis.call('ZREM', q.delayed, id)
  end
  redis.call('HSET', key, 'state', states.cancelled, 'cause', cause, 'cancel_requested', '1')
  redis.call('HDEL', key, 'payload', 'wake_ms', 'human_since_us')
  redis.call('PEXPIRE', key, q.result_ttl_ms)
  redis.call('PEXPIRE', q.prefix .. 'children:' .. id, q.result_ttl_ms)
  count_down_and_wake(q, key, false)
  return 'cancelled'
end

-- The unfinished descendants of job `root_id` cancelled, cause parent, each
-- once and without recursion (a chain is as deep as the family limits
-- allow). The walk goes through jobs it cancels or marks: a finished job's
-- children are not its parent's to stop. The handlers of those cancelled
-- here (not marked: their daemons record those) are appended to `into`.
local function cancel_descendants(q, root_id, into)
  local walk, seen, i = {root_id}, {}, 1
  while i <= #walk do
    for _, child in ipairs(redis.call('ZRANGE', q.prefix .. 'children:' .. walk[i], 0, -1)) do
      if not seen[child] then
        seen[child] = true
        local key = q.prefix .. 'job:' .. child
        local r = cancel_job(q, key, 'parent')
        if r == 'cancelled' then into[#into + 1] = redis.call('HGET', key, 'handler') or '' end
        if r == 'cancelled' or r == 'marked' then walk[#walk + 1] = child end
      end
    end
    i = i + 1
  end
end

-- A person's wait at its limit: the job ends deadline_exceeded, stage
-- human_wait (its machine budget was not charged for the wait:
-- human_waited_us says how long it was). The caller takes it out of the
-- delayed set and counts it.
local function end_human_wait(q, job_key)
  local f = redis.call('HMGET', job_key, 'id', 'human_since_us', 'human_waited_us')
  local now_us = broker_now_us()
  local waited = (tonumber(f[3] or '0') or 0) + math.max(now_us - (tonumber(f[2] or '') or now_us), 0)
  redis.call('HSET', job_key, 'state', states.deadline_exceeded, 'stage', 'human_wait', 'payload', '',
    'human_waited_us', string.format('%.0f', waited))
  redis.call('HDEL', job_key, 'human_since_us', 'wake_ms')
  redis.call('PEXPIRE', job_key, q.result_ttl_ms)
  redis.call('PEXPIRE', q.prefix .. 'children:' .. f[1], q.result_ttl_ms)
  count_down_and_wake(q, job_key, false)
end

-- A waiting job back on the stream, woke_by 'children' or 'deadline': its
-- run resumes with what has finished. Its children still
-- unfinished are cancelled as it goes (their handlers into `into`): nobody
-- waits for them, and one holding a worker would hold back the resumed run.
local function resume_waiting(q, job_key, woke_by, into)
  local f = redis.call('HMGET', job_key, 'id', 'handler', 'freshness_ms', 'deadline_us')
  local due_ms = string.format('%.0f', math.floor(broker_now_us() / 1000))
  local fields = {'id', f[1], 'handler', f[2], 'freshness_ms', f[3], 'min_budget_ms', '0', 'due_ms', due_ms}
  if f[4] and f[4] ~= '' then
    table.insert(fields, 'deadline_us')
    table.insert(fields, f[4])
  end
  redis.call('ZREM', q.delayed, f[1])
  local entry = redis.call('XADD', q.stream, '*', unpack(fields))
  redis.call('HSET', job_key, 'state', states.queued, 'entry', entry, 'woke_by', woke_by, 'deliveries', '0',
    'due_ms', due_ms)
  redis.call('HDEL', job_key, 'wake_ms')
  redis.call('HINCRBY', job_key, 'wakes', 1)
  cancel_descendants(q, f[1], into)  -- after it is queued: their count-downs do not resume it again
end
