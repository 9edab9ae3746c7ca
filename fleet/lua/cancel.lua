-- cancel (DELETE): a queued job is finished as cancelled on the spot (its
-- entry, delivered or not, is acknowledged and deleted), and so is a
-- scheduled one (out of the delayed set), and so is a parent waiting for
-- its children (out of the delayed set too); a running one is marked, and the
-- daemon running it stops it at its next lease renewal. Its child jobs
-- (hg:{Q}:children:<id>, in the same slot: a child is written in its
-- parent's shard), and theirs, are cancelled alike with cause 'parent'
-- (a running one marked, cancel_cause 'parent', which finish records); a
-- finished child's own children are not reached (lib/family.lua).
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
-- @include family
local q = {stream = KEYS[1], delayed = KEYS[3], group = ARGV[1], result_ttl_ms = ARGV[2]}
q.prefix = string.sub(q.stream, 1, #q.stream - #'stream')
local job_key = KEYS[2]

local cause = ARGV[3]
if not cause or cause == '' then cause = 'requested' end
local result = cancel_job(q, job_key, cause)
local reply = {result}
if result == 'cancelled' or result == 'marked' then
  cancel_descendants(q, string.sub(job_key, #q.prefix + #'job:' + 1), reply)
end
-- the fleet's totals (stats, beside the stream: the queue's hash slot)
local cancelled = #reply - 1 + (result == 'cancelled' and 1 or 0)
if cancelled > 0 then redis.call('HINCRBY', q.prefix .. 'stats', 'finished:cancelled', cancelled) end
return reply
