-- cancel (DELETE): a queued job is finished as cancelled on the spot (its
-- entry, delivered or not, is acknowledged and deleted), and so is a
-- scheduled one (out of the delayed set), and so is a parent waiting for
-- its children (out of the delayed set too); a running one is marked, and the
-- daemon running it stops it at its next lease renewal. Its child jobs
-- (hg:{Q}:children:<id>, in the same slot: a child is written in its
-- parent's shard), and theirs, are cancelled alike with cause 'parent'
-- (a running one marked, cancel_cause 'parent', which finish records).
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2] job_key         hg:{Q}:job:<id>
-- KEYS[3] delayed_key     hg:{Q}:delayed
-- ARGV[1] group           the consumer group, 'hourglass'
-- ARGV[2] result_ttl_ms   how long the outcome is kept
-- ARGV[3] cause           the job's own cause: 'requested' (DELETE), 'parent' (its parent's wait
--                         ended without it); '' requested
--
-- Reply: {the job's own status, then the handler of each descendant
-- cancelled here (not marked): no daemon's run ends those, so the daemon
-- that asked counts their outcomes}
--   'cancelled'  it was queued, scheduled or waiting: state cancelled, its cause, payload dropped, TTL
--   'marked'     it is running: cancel_requested = 1, nothing else
--   'finished'   an outcome is recorded already: nothing written, no child touched
--   'unknown'    no job hash: nothing written
local stream_key = KEYS[1]
local job_key = KEYS[2]
local delayed_key = KEYS[3]
local group = ARGV[1]
local result_ttl_ms = ARGV[2]
local prefix = string.sub(stream_key, 1, #stream_key - #'stream')

-- A job's first outcome recorded here counts down its parent's wait (as
-- finish.lua does); a waiting parent is put due at once in the delayed set,
-- where promote resumes it if its rule is met (or its wake time came).
local function count_down_parent(job_key, job_prefix, delayed_key, ok)
  local parent = redis.call('HGET', job_key, 'parent')
  if not parent or parent == '' then return end
  local parent_key = job_prefix .. parent
  if redis.call('EXISTS', parent_key) == 0 then return end
  -- once per child, whatever ends it again (a dead child replayed): the parent's counts stay true
  if redis.call('HSETNX', job_key, 'counted_down', '1') == 0 then return end
  redis.call('HINCRBY', parent_key, 'children_done', 1)
  if ok then redis.call('HINCRBY', parent_key, 'children_ok', 1) end
  if redis.call('HGET', parent_key, 'state') == 'waiting' then redis.call('ZADD', delayed_key, 0, parent) end
end

local function cancel_one(key, cause)
  local state = redis.call('HGET', key, 'state')
  if not state then return 'unknown' end
  if state == 'running' then
    redis.call('HSET', key, 'cancel_requested', '1')
    if cause ~= 'requested' then redis.call('HSET', key, 'cancel_cause', cause) end
    return 'marked'
  end
  if state == 'scheduled' or state == 'waiting' then
    redis.call('ZREM', delayed_key, redis.call('HGET', key, 'id'))
  elseif state == 'queued' then
    local entry = redis.call('HGET', key, 'entry')
    redis.call('XACK', stream_key, group, entry)
    redis.call('XDEL', stream_key, entry)
  else
    return 'finished'
  end
  redis.call('HSET', key, 'state', 'cancelled', 'cause', cause, 'cancel_requested', '1')
  redis.call('HDEL', key, 'payload')
  redis.call('PEXPIRE', key, result_ttl_ms)
  -- the fleet's totals (stats, beside the stream: the queue's hash slot)
  redis.call('HINCRBY', prefix .. 'stats', 'finished:cancelled', 1)
  redis.call('PEXPIRE', prefix .. 'children:' .. redis.call('HGET', key, 'id'), result_ttl_ms)
  count_down_parent(key, prefix .. 'job:', delayed_key, false)
  return 'cancelled'
end

local cause = ARGV[3]
if not cause or cause == '' then cause = 'requested' end
local result = cancel_one(job_key, cause)
local reply = {result}
if result == 'cancelled' or result == 'marked' then
  -- its children, then theirs, each once
  local walk, seen, i = {string.sub(job_key, #prefix + #'job:' + 1)}, {}, 1
  while i <= #walk do
    for _, child in ipairs(redis.call('ZRANGE', prefix .. 'children:' .. walk[i], 0, -1)) do
      if not seen[child] then
        seen[child] = true
        if cancel_one(prefix .. 'job:' .. child, 'parent') == 'cancelled' then
          reply[#reply + 1] = redis.call('HGET', prefix .. 'job:' .. child, 'handler') or ''
        end
        walk[#walk + 1] = child
      end
    end
    i = i + 1
  end
end
return reply
