-- queue: a queue's state at a glance for its operators (GET /v1/queues),
-- and its pause switch. Read in one atomic step, so the counts agree.
--
-- KEYS[1] stream_key    hg:{Q}:stream
-- KEYS[2] delayed_key   hg:{Q}:delayed
-- KEYS[3] dead_key      hg:{Q}:dead
-- KEYS[4] slots_key     hg:{Q}:slots
-- KEYS[5] stats_key     hg:{Q}:stats
-- KEYS[6] paused_key    hg:{Q}:paused
-- ARGV[1] op            'look', 'pause' or 'resume'
-- ARGV[2] group         the consumer group, 'hourglass'
--
-- pause: paused_key = the broker's TIME in ms (since when), unless paused
--   already; consumers stop reading at their next renewal. resume: deleted.
--   Both then answer as look does.
-- look: {TIME s, TIME us, stream length, pending, oldest waiting entry id
--   ('' none), scheduled, dead, mean_run_us, paused since ms ('' not
--   paused), consumers}: consumers a flat array of name, slots, lease expiry
--   ms, entries held, for every consumer with slots or entries held;
--   then retrying (the scheduled jobs on an attempt after their first,
--   among the first 1000 by due time), whether that count (and waiting's)
--   is of them all (1) or of the first 1000 only (0), the stats hash, flat
--   (the fleet's totals by outcome and stage, which finish.lua and start.lua
--   keep), and waiting (of the delayed set's jobs, those suspended for their
--   children, a wake time or a person's signal, not due to run; among the
--   same first 1000). Integers but the ids and the times (strings).
local stream_key, delayed_key, dead_key = KEYS[1], KEYS[2], KEYS[3]
local slots_key, stats_key, paused_key = KEYS[4], KEYS[5], KEYS[6]
local op, group = ARGV[1], ARGV[2]
-- @include states

local t = redis.call('TIME')
if op == 'pause' then
  local now_ms = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  redis.call('SET', paused_key, now_ms, 'NX')
elseif op == 'resume' then
  redis.call('DEL', paused_key)
elseif op ~= 'look' then
  return redis.error_reply('queue: unknown op ' .. tostring(op))
end

local length, pending, oldest = 0, 0, ''
local held = {}
if redis.call('EXISTS', stream_key) == 1 then
  length = redis.call('XLEN', stream_key)
  local ok, p = pcall(redis.call, 'XPENDING', stream_key, group)
  if ok then
    pending = p[1]
    if p[4] then
      for _, c in ipairs(p[4]) do held[c[1]] = tonumber(c[2]) end
    end
  end
  -- The oldest entry not yet delivered: the first after the group's last delivered one.
  local ok2, groups = pcall(redis.call, 'XINFO', 'GROUPS', stream_key)
  if ok2 then
    for _, g in ipairs(groups) do
      local name, last
      for k = 1, #g, 2 do
        if g[k] == 'name' then name = g[k + 1] end
        if g[k] == 'last-delivered-id' then last = g[k + 1] end
      end
      if name == group and last then
        local first = redis.call('XRANGE', stream_key, '(' .. last, '+', 'COUNT', 1)
        if first[1] then oldest = first[1][1] end
      end
    end
  end
end

local consumers = {}
local slots = redis.call('HGETALL', slots_key)
local listed = {}
for i = 1, #slots, 2 do
  local n, expiry = string.match(slots[i + 1], '^(%d+):(%d+)$')
  if n then
    table.insert(consumers, slots[i])
    table.insert(consumers, tonumber(n))
    table.insert(consumers, expiry)
    table.insert(consumers, held[slots[i]] or 0)
    listed[slots[i]] = true
  end
end
for name, count in pairs(held) do
  if not listed[name] then  -- entries held by a consumer that left or died: reclaim will take them
    table.insert(consumers, name)
    table.insert(consumers, 0)
    table.insert(consumers, '')
    table.insert(consumers, count)
  end
end

local mean = math.floor(tonumber(redis.call('HGET', stats_key, 'mean_run_us') or '0') or 0)
local dead = 0
if redis.call('EXISTS', dead_key) == 1 then dead = redis.call('XLEN', dead_key) end
-- Retries and waits among the delayed set's jobs: a job hash each, so
-- bounded (a dashboard asks every few seconds).
local scheduled = redis.call('ZCARD', delayed_key)
local retrying, waiting = 0, 0
local job_prefix = string.sub(stream_key, 1, #stream_key - #'stream') .. 'job:'
for _, id in ipairs(redis.call('ZRANGE', delayed_key, 0, 999)) do
  local f = redis.call('HMGET', job_prefix .. id, 'attempt', 'state')
  if f[2] == states.waiting then
    waiting = waiting + 1
  elseif (tonumber(f[1] or '1') or 1) > 1 then
    retrying = retrying + 1
  end
end
return {t[1], t[2], length, pending, oldest, scheduled, dead, mean, redis.call('GET', paused_key) or '', consumers,
  retrying, scheduled <= 1000 and 1 or 0, redis.call('HGETALL', stats_key), waiting}
