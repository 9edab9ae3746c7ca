-- release: a daemon leaving the fleet gives up its lease and its slots, if
-- they are still its own.
--
-- KEYS[1] lease_key   hg:{Q}:lease:<consumer>
-- KEYS[2] slots_key   hg:{Q}:slots
-- ARGV[1] consumer    this daemon's consumer name
-- ARGV[2] token       this process's lease token
--
-- Reply: an integer, 1 (released) or 0 (the lease is not this token's:
-- nothing written)
local lease_key = KEYS[1]
local slots_key = KEYS[2]
local consumer = ARGV[1]
local token = ARGV[2]

local cur = redis.call('GET', lease_key)
if cur and string.match(cur, '^(.*):%d+$') == token then
  redis.call('DEL', lease_key)
  redis.call('HDEL', slots_key, consumer)
  return 1
end
return 0
