-- hand back (drain): the entries this consumer holds go back for immediate
-- reclaim by the others: idle set far past any lease, and a job this consumer
-- life started queued again with its delivery uncounted (a drain is not a
-- failed delivery). "Started by us" is the job's start token, so a start
-- whose reply the drain cut off is uncounted too. A job started by a worker
-- that died before stays as it is: that start counts.
--
-- KEYS[1] stream_key      hg:{Q}:stream
-- KEYS[2], KEYS[3], ...   hg:{Q}:job:<id>, one per entry, in ARGV's order
-- ARGV[1] group           the consumer group, 'hourglass'
-- ARGV[2] consumer        this daemon's consumer name
-- ARGV[3] idle_ms         the idle time the entries get ('100000000000')
-- ARGV[4] lease_token     this consumer life's lease token
-- ARGV[5], ARGV[6], ...   the entry ids
--
-- Reply: an integer, how many of the entries this consumer still held
local stream_key = KEYS[1]
local first_job_key = 2
local group = ARGV[1]
local consumer = ARGV[2]
local idle_ms = ARGV[3]
local lease_token = ARGV[4]
local first_entry_arg = 5
-- @include states

local n = 0
for i = first_job_key, #KEYS do
  local job_key = KEYS[i]
  local entry = ARGV[first_entry_arg + i - first_job_key]
  local p = redis.call('XPENDING', stream_key, group, entry, entry, 1, consumer)
  if #p == 1 then
    local f = redis.call('HMGET', job_key, 'state', 'start_token', 'starts')
    local state, start_token, starts = f[1], f[2], f[3]
    if state == states.running and start_token == lease_token .. '/' .. entry then
      redis.call('HINCRBY', job_key, 'deliveries', -1)
      -- not started after all: no start on its timeline (start.lua appended
      -- its line last to `starts`)
      redis.call('HSET', job_key, 'state', states.queued, 'starts', string.match(starts or '', '^(.-)[^\n]*\n$') or '')
      redis.call('HDEL', job_key, 'start_token', 'started_ms')
    end
    redis.call('XCLAIM', stream_key, group, consumer, 0, entry, 'IDLE', idle_ms, 'JUSTID')
    n = n + 1
  end
end
return n
