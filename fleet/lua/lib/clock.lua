-- The broker's clock (TIME), read once per script on first need: every
-- decision a script makes is judged at one instant.
local now_us_read
local function broker_now_us()
  if not now_us_read then
    local t = redis.call('TIME')
    now_us_read = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now_us_read
end
