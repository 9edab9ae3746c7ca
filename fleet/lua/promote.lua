-- promote: moves due jobs from the delayed set to the stream. Any daemon's
-- reader runs it with the ids it saw due (the fleet needs no leader); each
-- move is atomic and checks the job is still due and still in the set, so
-- two daemons racing move a job once. A due job is admitted again, as at
-- enqueue, its freshness counted from its due time: when the fleet's
-- predicted wait leaves less than its minimum budget (or the overall
-- deadline would pass first), its outcome is deadline_exceeded, stage
-- admission, and it never runs. A parent waiting for its children whose
-- wake time has come (finish.lua put it there) goes back on the stream as
-- it is, woke_by 'deadline' ('children' when its rule is met: a child that
-- ended outside finish.lua puts its parent due at once, and one whose rule
-- is not yet met goes back to its wake time): its resumed run answers with
-- what has finished. Its children still unfinished then are cancelled at
-- once, cause 'parent', and theirs with them (a running one marked, as
-- cancel.lua marks it): nobody waits for them, and one holding a worker
-- would hold back the resumed run that needs it.
-- A job waiting for a person's signal whose wait's limit has come ends
-- deadline_exceeded, stage human_wait (its machine budget was not charged
-- for the wait: human_waited_us says how long it was).
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2] delayed_key     hg:{Q}:delayed
-- KEYS[2 + i]             job i's hg:{Q}:job:<id> (i = 1..n)
-- ARGV[1] wait_us         the fleet's predicted wait; '-1' unbounded; '' no admission (--policy fifo)
-- ARGV[2] result_ttl_ms   how long an outcome recorded here is kept
-- ARGV[3] group           the consumer group, 'hourglass' (a cancelled queued child's entry is acknowledged)
-- ARGV[3 + i]             job i's id
--
-- Reply: {'nostream'} (no stream: nothing moved, the set as it was), or
-- {moved, expired, next_due_ms, TIME s, TIME us, human_wait, cancelled}
--   moved        integer: jobs added to the stream
--   expired      array of the handlers of jobs recorded deadline_exceeded/admission
--   next_due_ms  integer: the earliest due time left in the set; -1 when it is empty
--   human_wait   array of the handlers of jobs recorded deadline_exceeded/human_wait
--   cancelled    array of the handlers of children recorded cancelled/parent here (not marked):
--                no daemon's run ends those, so the daemon that moved their parent counts them
local stream_key = KEYS[1]
local delayed_key = KEYS[2]
local wait_arg = ARGV[1]
local result_ttl_ms = ARGV[2]
local group = ARGV[3]

-- @include family
-- @include admission
local q = {stream = stream_key, delayed = delayed_key, group = group, result_ttl_ms = result_ttl_ms}
q.prefix = string.sub(stream_key, 1, #stream_key - #'stream')
local now_us = broker_now_us()
if redis.call('EXISTS', stream_key) == 0 then return {'nostream'} end

-- Whether a job due at due_ms can still start in time, judged now: what is
-- left of its freshness (counted from its due time) and of its deadline.
local function admitted(freshness_ms, min_budget_ms, deadline_us, due_ms)
  if wait_arg == '' then return true end
  local wait = tonumber(wait_arg)
  local need = tonumber(min_budget_ms or '0') * 1000
  local freshness = tonumber(freshness_ms or '-1')
  if freshness >= 0 and not admits(freshness * 1000 - math.max(now_us - due_ms * 1000, 0), wait, need) then
    return false
  end
  if deadline_us and deadline_us ~= '' and not admits(tonumber(deadline_us) - now_us, wait, need) then return false end
  return true
end

local moved, expired, human_expired, cancelled = 0, {}, {}, {}
for i = 3, #KEYS do
  local job_key = KEYS[i]
  local job_id = ARGV[i + 1]
  local score = redis.call('ZSCORE', delayed_key, job_id)
  if score and tonumber(score) * 1000 <= now_us then
    redis.call('ZREM', delayed_key, job_id)
    local f = redis.call('HMGET', job_key, 'state', 'handler', 'freshness_ms', 'min_budget_ms', 'deadline_us')
    local state, handler, freshness_ms, min_budget_ms, deadline_us = f[1], f[2], f[3], f[4], f[5]
    local rule = redis.call('HGET', job_key, 'wait_rule') or ''
    -- a wait's own time (its wake time, or a person's limit) may not have come:
    -- a child that ended outside finish.lua puts its parent due at once
    local wake_ms = tonumber(redis.call('HGET', job_key, 'wake_ms') or '')
    local wake_due = wake_ms ~= nil and wake_ms * 1000 <= now_us
    if state == states.waiting and string.sub(rule, 1, 7) == 'signal:' and not wake_due then
      if wake_ms then redis.call('ZADD', delayed_key, string.format('%.0f', wake_ms), job_id) end
    elseif state == states.waiting and string.sub(rule, 1, 7) == 'signal:' then
      end_human_wait(q, job_key)
      table.insert(human_expired, handler or '')
    elseif state == states.waiting and not wait_over(job_key) and not wake_due then
      if wake_ms then redis.call('ZADD', delayed_key, string.format('%.0f', wake_ms), job_id) end
    elseif state == states.waiting then
      resume_waiting(q, job_key, wait_over(job_key) and 'children' or 'deadline', cancelled)
      moved = moved + 1
    elseif state == states.scheduled then
      if admitted(freshness_ms, min_budget_ms, deadline_us, tonumber(score)) then
        local fields = {'id', job_id, 'handler', handler, 'freshness_ms', freshness_ms, 'min_budget_ms', min_budget_ms,
          'due_ms', score}
        if deadline_us and deadline_us ~= '' then
          table.insert(fields, 'deadline_us')
          table.insert(fields, deadline_us)
        end
        local entry = redis.call('XADD', stream_key, '*', unpack(fields))
        redis.call('HSET', job_key, 'state', states.queued, 'entry', entry)
        moved = moved + 1
      else
        local waited_ms = math.max(now_us / 1000 - tonumber(score), 0)
        redis.call('HSET', job_key, 'state', states.deadline_exceeded, 'stage', 'admission', 'queued_ms',
          string.format('%.3f', waited_ms), 'payload', '')
        redis.call('PEXPIRE', job_key, result_ttl_ms)
        table.insert(expired, handler or '')
        count_down_and_wake(q, job_key, false)
      end
    end
  end
end
local stats_key = q.prefix .. 'stats'
if #expired > 0 then  -- the fleet's totals (stats, beside the stream: the queue's hash slot)
  redis.call('HINCRBY', stats_key, 'expired:admission', #expired)
end
if #human_expired > 0 then redis.call('HINCRBY', stats_key, 'expired:human_wait', #human_expired) end
if #cancelled > 0 then redis.call('HINCRBY', stats_key, 'finished:cancelled', #cancelled) end
local first = redis.call('ZRANGE', delayed_key, 0, 0, 'WITHSCORES')
local next_due = -1
if #first == 2 then next_due = tonumber(first[2]) end
return {moved, expired, next_due, string.format('%d', math.floor(now_us / 1000000)),
  string.format('%d', now_us % 1000000), human_expired, cancelled}
