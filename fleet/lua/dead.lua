-- dead: an operator's hand on dead-lettered jobs (their workers died
-- max_deliveries times; start.lua kept them whole): replay one, delete one,
-- or purge the oldest.
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2] slots_key       hg:{Q}:slots
-- KEYS[3] stats_key       hg:{Q}:stats
-- KEYS[4] dead_key        hg:{Q}:dead
-- KEYS[5] job_key         hg:{Q}:job:<id>
-- ARGV[1] op              'replay', 'delete' or 'purge'
-- ARGV[2] group           the consumer group, 'hourglass'
-- replay: ARGV[3] freshness_ms ('-1': none), ARGV[4] min_budget_ms,
--         ARGV[5] admission ('1': judged by the predicted wait; '0': never refused)
--
-- replay: admitted again as a new job would be (the fleet's predicted wait,
--   read here as enqueue.lua reads it, against the new freshness and the
--   minimum budget) and, if it can start in time, queued again under its
--   own id: a new stream entry, deliveries 0, a first attempt again, its
--   overall deadline dropped (the replay is a new chance, its freshness the
--   bound), its TTL removed, its dead entry deleted.
--   Reply {'accepted', entry id, wait us} | {'refused', '', wait us} (nothing
--   written) | {'not_dead', state} | {'unknown'} | {'nostream'}.
-- delete: the job and its dead entry deleted. Reply {'deleted'} |
--   {'not_dead', state} | {'unknown'}.
-- purge: ARGV[3] count, ARGV[4] the job keys' prefix ('hg:{Q}:job:', in
--   the queue's hash slot): the oldest `count` dead entries deleted, each
--   with its job if that is still dead (one whose record expired leaves
--   only its entry). Reply {jobs deleted, entries deleted, entries left}.
local stream_key, slots_key, stats_key, dead_key, job_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op, group = ARGV[1], ARGV[2]
-- @include fleet_wait
-- @include admission
-- @include states

if op == 'purge' then
  local entries = redis.call('XRANGE', dead_key, '-', '+', 'COUNT', tonumber(ARGV[3]))
  local jobs, ids = 0, {}
  for _, e in ipairs(entries) do
    local fields = e[2]
    for k = 1, #fields, 2 do
      if fields[k] == 'id' then
        local key = ARGV[4] .. fields[k + 1]
        if redis.call('HGET', key, 'state') == states.dead then
          redis.call('DEL', key)
          jobs = jobs + 1
        end
      end
    end
    table.insert(ids, e[1])
  end
  if #ids > 0 then redis.call('XDEL', dead_key, unpack(ids)) end
  return {jobs, #ids, redis.call('XLEN', dead_key)}
end

local f = redis.call('HMGET', job_key, 'state', 'dead_entry', 'id', 'handler', 'attempt')
local state, dead_entry, job_id, handler = f[1], f[2], f[3], f[4]
if not state then return {'unknown'} end
if state ~= states.dead then return {'not_dead', state} end

if op == 'delete' then
  if dead_entry and dead_entry ~= '' then redis.call('XDEL', dead_key, dead_entry) end
  redis.call('DEL', job_key)
  return {'deleted'}
end
if op ~= 'replay' then return redis.error_reply('dead: unknown op ' .. tostring(op)) end

local freshness_ms, min_budget_ms, admission = ARGV[3], ARGV[4], ARGV[5]
local freshness = tonumber(freshness_ms)
local wait = 0
if admission == '1' and freshness >= 0 then
  read_fleet_counts(stream_key, group, stats_key, slots_key)  -- enqueue.lua's predicted wait
  wait = fleet_predicted_wait_us()
  if not admits(freshness * 1000, wait, tonumber(min_budget_ms) * 1000) then return {'refused', '', wait} end
end

local entry = redis.call('XADD', stream_key, 'NOMKSTREAM', '*', 'id', job_id, 'handler', handler, 'freshness_ms',
  freshness_ms, 'min_budget_ms', min_budget_ms)
if not entry then return {'nostream'} end
-- a new timeline from the replay's admission (its entry's id is that time)
redis.call('HSET', job_key, 'state', states.queued, 'entry', entry, 'deliveries', '0', 'freshness_ms', freshness_ms,
  'min_budget_ms', min_budget_ms, 'accepted_ms', string.match(entry, '^(%d+)'))
if f[5] then redis.call('HSET', job_key, 'attempt', '1') end
redis.call('HDEL', job_key, 'cause', 'dead_entry', 'consumer', 'start_token', 'finish_token', 'finish_reply',
  'cancel_requested', 'deadline_us', 'attempts', 'due_ms', 'started_ms', 'starts', 'woke_by', 'wait_rule',
  'signal_payload', 'wake_ms', 'human_since_us')
redis.call('PERSIST', job_key)
if dead_entry and dead_entry ~= '' then redis.call('XDEL', dead_key, dead_entry) end
redis.call('HINCRBY', stats_key, 'replayed', 1)
return {'accepted', entry, wait}
