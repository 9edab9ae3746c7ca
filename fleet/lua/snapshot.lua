-- snapshot: what admission at enqueue reads, in one round trip. Writes nothing.
-- (The decision itself is C++: admit_at_enqueue.)
--
-- KEYS[1] stream_key     hg:{Q}:stream
-- KEYS[2] slots_key      hg:{Q}:slots
-- KEYS[3] stats_key      hg:{Q}:stats
-- KEYS[4] idem_key       hg:{Q}:idem:<key> (read only when has_idem_key is '1')
-- ARGV[1] group          the consumer group, 'hourglass'
-- ARGV[2] has_idem_key   '1' or '0'
--
-- Reply: {backlog, mean_run_us, live_slots, prior_id}
--   backlog      integer: XLEN less the group's pending count
--   mean_run_us  integer: the stats' mean run time, floored (0: none yet)
--   live_slots   integer: the slots whose lease expiry is past the broker's TIME
--   prior_id     string: the job id idem_key names, '' for none
local stream_key = KEYS[1]
local slots_key = KEYS[2]
local stats_key = KEYS[3]
local idem_key = KEYS[4]
local group = ARGV[1]
local has_idem_key = ARGV[2]

local prior = ''
if has_idem_key == '1' then prior = redis.call('GET', idem_key) or '' end
local len = redis.call('XLEN', stream_key)
local pending = 0
local ok, p = pcall(redis.call, 'XPENDING', stream_key, group)
if ok then pending = p[1] end
local mean = tonumber(redis.call('HGET', stats_key, 'mean_run_us') or '0') or 0
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = 0
local slots = redis.call('HGETALL', slots_key)
for i = 1, #slots, 2 do
  local n, expiry = string.match(slots[i + 1], '^(%d+):(%d+)$')
  if n and tonumber(expiry) > now_ms then live = live + tonumber(n) end
end
return {len - pending, math.floor(mean), live, prior}
