-- shards: a sharded queue's record of its shards' hash tags (shard 1 on,
-- separated by spaces), in shard 0's slot. Written only while it still
-- says what the writer read, so daemons starting together agree on one
-- layout: the first write wins, the others go by it.
--
-- KEYS[1] record_key   hg:{Q}:shards
-- ARGV[1] expected     the record as read ('' none)
-- ARGV[2] desired      the record to write
--
-- Reply: the record in force afterwards (desired when it was written).
local now = redis.call('GET', KEYS[1]) or ''
if now ~= ARGV[1] then return now end
redis.call('SET', KEYS[1], ARGV[2])
return ARGV[2]
