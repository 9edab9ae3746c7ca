-- schedule: a periodic job's record on the broker, hg:{Q}:schedule:<name>,
-- so that every daemon settles each fire of it at most once, and a fleet
-- back from downtime knows which fires it missed.
--
-- KEYS[1] schedule_key    hg:{Q}:schedule:<name>
-- KEYS[2] paused_key      hg:{Q}:paused (look reads it: a paused queue's fires are missed)
-- ARGV[1] op              'look', 'settle' or 'ran'
--
-- look: the record, made on first sight with settled_ms = the broker's TIME
--   (fires before a schedule is first seen are neither run nor counted).
--   Reply {settled_ms, last_fire_ms, last_job, missed, TIME s, TIME us,
--   paused since ms}; settled_ms an integer, the rest strings ('' when none).
-- settle: ARGV[2] fire_ms, ARGV[3] missed, ARGV[4] settled_ms as the caller's
--   look read it: fires up to fire_ms are settled by this call, unless the
--   record moved since that look (compare and set: another daemon settled,
--   and the caller's count of missed fires may be wrong).
--   Reply 1: settled here (the caller runs the fire, counts the missed); 0: not.
-- ran: ARGV[2] job id: the job of the latest run. Reply 1.
local schedule_key = KEYS[1]
local op = ARGV[1]

if op == 'look' then
  local t = redis.call('TIME')
  local now_ms = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  redis.call('HSETNX', schedule_key, 'settled_ms', now_ms)
  local f = redis.call('HMGET', schedule_key, 'settled_ms', 'last_fire_ms', 'last_job', 'missed')
  return {tonumber(f[1]), f[2] or '', f[3] or '', f[4] or '0', t[1], t[2], redis.call('GET', KEYS[2]) or ''}
elseif op == 'settle' then
  local fire_ms = tonumber(ARGV[2])
  local settled = tonumber(redis.call('HGET', schedule_key, 'settled_ms') or '0')
  if settled >= fire_ms or settled ~= tonumber(ARGV[4]) then return 0 end
  redis.call('HSET', schedule_key, 'settled_ms', ARGV[2], 'last_fire_ms', ARGV[2])
  if tonumber(ARGV[3]) > 0 then redis.call('HINCRBY', schedule_key, 'missed', ARGV[3]) end
  return 1
elseif op == 'ran' then
  redis.call('HSET', schedule_key, 'last_job', ARGV[2])
  return 1
end
return redis.error_reply('schedule: unknown op ' .. tostring(op))
