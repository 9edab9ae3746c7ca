-- enqueue: adds a batch of jobs, in order, each admitted on its own: a job
-- whose idempotency key names one already answers that one; a job whose
-- freshness cannot cover the fleet's predicted wait plus its minimum budget
-- is refused; the rest are added. The predicted wait is read here, in the
-- same atomic step as the adds ((backlog + 1/2) x mean run time / live slots, the
-- backlog counting the jobs this batch added before), so producers racing
-- each other never both fill the last free capacity. The fleet's counts are
-- read only when a job in the batch needs them.
-- NOMKSTREAM: a stream deleted behind our back is not recreated without its
-- consumer group (the caller creates both and runs this again).
--
-- A job with a delay waits in the delayed set (score: its due time in ms on
-- the broker's clock), state 'scheduled', until promote.lua moves it to the
-- stream; its admission by the predicted wait happens then. A job with a
-- retry policy or an overall deadline keeps them in its hash; the deadline
-- becomes a time on the broker's clock here, so skewed daemons judge alike.
--
-- KEYS[1] stream_key        hg:{Q}:stream
-- KEYS[2] slots_key         hg:{Q}:slots
-- KEYS[3] stats_key         hg:{Q}:stats
-- KEYS[4] delayed_key       hg:{Q}:delayed
-- KEYS[5] paused_key        hg:{Q}:paused
-- KEYS[3 + 3i], KEYS[4 + 3i], KEYS[5 + 3i]  job i's hg:{Q}:job:<id>, hg:{Q}:idem:<key> and
--                           hg:{Q}:children:<parent> (i = 1..n; a child job goes to its parent's shard)
-- ARGV[1] group             the consumer group, 'hourglass'
-- ARGV[2] idem_ttl_ms       how long an idem_key is kept
-- ARGV[3] refuse_paused     '1': while the queue is paused, refuse every job of the batch
-- ARGV[4] parent_reserve_us what a parent keeps back from its children's deadline (--call-reserve)
-- ARGV[5] max_depth         how deep a family may grow: a parent at this depth may have no children
-- ARGV[6] max_children      the children one parent may have (--max-children)
-- ARGV[7 + 16(i-1)] ...     job i's sixteen fields:
--   job_id           32 hex digits
--   handler
--   payload
--   content_type
--   freshness_ms     how long it may wait to start (from its due time); '-1': no bound (always admitted)
--   min_budget_ms
--   idempotency_key  '' for none
--   admission        '1': judged by the predicted wait; '0' (--policy fifo): never refused
--   max_attempts     '1': never retried
--   retry_base_us    the backoff's base and cap (used by the consumer)
--   retry_cap_us
--   deadline_us      what is left of the job's overall deadline; '-1': none
--   delay_us         how long before it may start; '0': at once
--   not_before_us    nor before this time (us since the epoch, the broker's clock); '0': none
--   parent           a child job's parent's id ('' for none). The parent must be held and not
--                    finished; its overall deadline (deadline_us), less parent_reserve_us, cuts
--                    the child's. The child's hash names it ('parent'), its id joins the
--                    parent's children (a sorted set, kept idem_ttl_ms, scored by the parent's 'children' count)
--                    and its 'depth' is its parent's + 1. A parent at max_depth, or with
--                    max_children already, takes no more.
--   retry_jitter     'full' or 'none': whether the consumer draws each backoff below its ceiling
--
-- Reply: {'nostream'} (no stream: nothing written), {'paused'} (refuse_paused
-- and the queue is paused: nothing written), or n three-element
-- arrays, in the jobs' order:
--   {'accepted', entry id, predicted_wait_us}   added: its stream entry (a delayed job: '', in
--                                                the delayed set instead), job hash and idem_key
--   {'duplicate', prior id, 0}                   its idem_key names a job already: nothing written
--   {'refused', '', predicted_wait_us}           the predicted wait leaves too little: nothing written
--   {'no_parent', '', 0}, {'parent_finished', '', 0}  its parent is not held, or has finished: nothing written
--   {'too_deep', '', 0}, {'too_many_children', '', 0}  its parent may have no more children: nothing written
-- predicted_wait_us is an integer: 0 when the counts were not needed, -1 when
-- no live slot serves a backlog (an unbounded wait).
local stream_key = KEYS[1]
local slots_key = KEYS[2]
local stats_key = KEYS[3]
local delayed_key = KEYS[4]
local paused_key = KEYS[5]
local group = ARGV[1]
local idem_ttl_ms = ARGV[2]
local parent_reserve_us = tonumber(ARGV[4])
local max_depth, max_children = tonumber(ARGV[5]), tonumber(ARGV[6])
local job_prefix = string.sub(stream_key, 1, #stream_key - #'stream') .. 'job:'
if ARGV[3] == '1' and redis.call('EXISTS', paused_key) == 1 then return {'paused'} end
local fields_per_job = 16

-- @include fleet_wait
-- @include admission
-- @include states

local out = {}
local n = (#ARGV - 6) / fields_per_job
for i = 1, n do
  local a = 7 + (i - 1) * fields_per_job
  local job_id, handler, payload, content_type = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local freshness_ms, min_budget_ms, idempotency_key = ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
  local admission, max_attempts, retry_base_us, retry_cap_us = ARGV[a + 7], ARGV[a + 8], ARGV[a + 9], ARGV[a + 10]
  local deadline_left_us, delay_us, not_before_us = tonumber(ARGV[a + 11]), tonumber(ARGV[a + 12]),
    tonumber(ARGV[a + 13])
  local parent, retry_jitter = ARGV[a + 14], ARGV[a + 15]
  local due_us = 0
  if delay_us > 0 or not_before_us > 0 then due_us = math.max(broker_now_us() + delay_us, not_before_us) end
  local delayed = due_us > 0 and due_us > broker_now_us()  -- a time already past: at once
  local job_key, idem_key, children_key = KEYS[3 + 3 * i], KEYS[4 + 3 * i], KEYS[5 + 3 * i]
  local prior = false
  if idempotency_key ~= '' then prior = redis.call('GET', idem_key) end
  -- A child: its parent held and running (or waiting), its deadline no later than the parent's.
  local parent_gone = false
  local depth = 0
  if parent ~= '' and not (prior and prior ~= job_id) then
    local p = redis.call('HMGET', job_prefix .. parent, 'state', 'deadline_us', 'depth', 'children')
    local parent_depth = tonumber(p[3] or '0') or 0
    depth = parent_depth + 1
    if not p[1] then
      parent_gone = 'no_parent'
    elseif not unfinished(p[1]) then
      parent_gone = 'parent_finished'
    elseif parent_depth >= max_depth then
      parent_gone = 'too_deep'
    elseif (tonumber(p[4] or '0') or 0) >= max_children and not redis.call('ZSCORE', children_key, job_id) then
      parent_gone = 'too_many_children'  -- (a batch sent again after 'nostream' finds its own child there)
    elseif p[2] and p[2] ~= '' then
      local left = math.max(tonumber(p[2]) - broker_now_us() - parent_reserve_us, 0)
      if deadline_left_us < 0 or left < deadline_left_us then deadline_left_us = left end
    end
  end
  if prior and prior ~= job_id then  -- (its own id: this batch sent again after 'nostream')
    out[i] = {'duplicate', prior, 0}
  elseif parent_gone then
    out[i] = {parent_gone, '', 0}
  else
    local wait, admitted = 0, true
    -- judged by what comes first: its freshness, or the job's overall deadline
    local freshness = tonumber(freshness_ms)
    if deadline_left_us >= 0 and (freshness < 0 or deadline_left_us / 1000 < freshness) then
      freshness = deadline_left_us / 1000
    end
    if admission == '1' and freshness >= 0 and not delayed then
      read_fleet_counts(stream_key, group, stats_key, slots_key)
      wait = fleet_predicted_wait_us()
      admitted = admits(freshness * 1000, wait, tonumber(min_budget_ms) * 1000)
    end
    if not admitted then
      out[i] = {'refused', '', wait}
    else
      local deadline_us = ''
      -- '%.0f': every digit of a microsecond time (tostring keeps 14)
      if deadline_left_us >= 0 then deadline_us = string.format('%.0f', broker_now_us() + deadline_left_us) end
      local entry, state = '', states.queued
      if delayed then
        -- never early: the due time rounds up to the next millisecond
        local due_ms = string.format('%.0f', math.ceil(due_us / 1000))
        redis.call('ZADD', delayed_key, due_ms, job_id)
        redis.call('HSET', job_key, 'due_ms', due_ms)
        state = states.scheduled
      else
        if deadline_us ~= '' then
          entry = redis.call('XADD', stream_key, 'NOMKSTREAM', '*', 'id', job_id, 'handler', handler,
            'freshness_ms', freshness_ms, 'min_budget_ms', min_budget_ms, 'deadline_us', deadline_us)
        else
          entry = redis.call('XADD', stream_key, 'NOMKSTREAM', '*', 'id', job_id, 'handler', handler,
            'freshness_ms', freshness_ms, 'min_budget_ms', min_budget_ms)
        end
        -- (a delayed job written before this is written again, alike, when the caller sends the batch again)
        if not entry then return {'nostream'} end
      end
      -- accepted_ms: the start of the job's timeline (its entry's id is that time, read from the broker's clock)
      local accepted_ms = delayed and string.format('%.0f', math.floor(broker_now_us() / 1000))
        or string.match(entry, '^(%d+)')
      redis.call('HSET', job_key, 'id', job_id, 'handler', handler, 'payload', payload, 'content_type',
        content_type, 'freshness_ms', freshness_ms, 'min_budget_ms', min_budget_ms, 'entry', entry, 'state',
        state, 'deliveries', '0', 'idempotency_key', idempotency_key, 'accepted_ms', accepted_ms)
      if max_attempts ~= '1' or deadline_us ~= '' then
        redis.call('HSET', job_key, 'attempt', '1', 'max_attempts', max_attempts, 'retry_base_us', retry_base_us,
          'retry_cap_us', retry_cap_us, 'retry_jitter', retry_jitter, 'deadline_us', deadline_us)
      end
      if idempotency_key ~= '' then redis.call('SET', idem_key, job_id, 'PX', idem_ttl_ms) end
      if parent ~= '' then
        redis.call('HSET', job_key, 'parent', parent, 'depth', depth)
        -- the parent's count of them, which orders the set: its GET reads them in the order sent
        -- (counted once: a batch written again after 'nostream' finds it there)
        if not redis.call('ZSCORE', children_key, job_id) then
          local n = redis.call('HINCRBY', job_prefix .. parent, 'children', 1)
          redis.call('ZADD', children_key, n, job_id)
        end
        -- kept idem_ttl after its latest child, unless its parent waits (kept until the parent's outcome)
        if redis.call('HGET', job_prefix .. parent, 'state') ~= states.waiting then
          redis.call('PEXPIRE', children_key, idem_ttl_ms)
        end
      end
      if fleet_counts and entry ~= '' then fleet_counts[1] = fleet_counts[1] + 1 end
      out[i] = {'accepted', entry, wait}
    end
  end
end
return out
