-- The fleet's predicted wait for a job admitted now, the executor's rule
-- (predicted_wait, hourglass/admission_policy.hpp) on the broker's counts:
-- (backlog + 1/2) x the mean run time (finish.lua's average) over the slots
-- of the live leases (renew.lua's); the half, for the first busy slot to
-- free up. The counts are read once.
-- @include clock
local fleet_counts  -- {backlog, mean_run_us, live_slots, pending}

-- The counts, read on first need (stream_key, group, stats_key, slots_key:
-- the queue's keys, all in its hash slot).
local function read_fleet_counts(stream_key, group, stats_key, slots_key)
  if fleet_counts then return fleet_counts end
  local len = redis.call('XLEN', stream_key)
  local pending = 0
  local ok, p = pcall(redis.call, 'XPENDING', stream_key, group)
  if ok then pending = p[1] end
  local mean = math.floor(tonumber(redis.call('HGET', stats_key, 'mean_run_us') or '0') or 0)
  local now_ms = math.floor(broker_now_us() / 1000)
  local live = 0
  local slots = redis.call('HGETALL', slots_key)
  for i = 1, #slots, 2 do
    local n, expiry = string.match(slots[i + 1], '^(%d+):(%d+)$')
    if n and tonumber(expiry) > now_ms then live = live + tonumber(n) end
  end
  fleet_counts = {math.max(len - pending, 0), math.max(mean, 0), live, pending}
  return fleet_counts
end

-- In microseconds, from the counts read: 0 without a backlog, -1 when no
-- live slot serves one (an unbounded wait).
local function fleet_predicted_wait_us()
  if fleet_counts[1] == 0 then return 0 end
  if fleet_counts[3] == 0 then return -1 end
  return math.floor((fleet_counts[1] + 0.5) * fleet_counts[2] / fleet_counts[3])
end
