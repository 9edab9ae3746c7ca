-- enqueue: adds the job, unless its idempotency key already names one.
-- NOMKSTREAM: a stream deleted behind our back is not recreated without its
-- consumer group (the caller creates both and runs this again).
--
-- KEYS[1] stream_key       hg:{Q}:stream
-- KEYS[2] job_key          hg:{Q}:job:<id>
-- KEYS[3] idem_key         hg:{Q}:idem:<key>
-- ARGV[1] job_id           32 hex digits
-- ARGV[2] handler
-- ARGV[3] payload
-- ARGV[4] content_type
-- ARGV[5] freshness_ms     how long it may wait to start; '-1': no bound
-- ARGV[6] min_budget_ms
-- ARGV[7] has_idem_key     '1' or '0'
-- ARGV[8] idempotency_key  '' for none
-- ARGV[9] idem_ttl_ms      how long idem_key is kept
--
-- Reply: a two-element array of strings
--   {'accepted', entry id}   added: the job hash, its stream entry, idem_key
--   {'duplicate', prior id}  idem_key names a job already: nothing written
--   {'nostream', ''}         no stream: nothing written
local stream_key = KEYS[1]
local job_key = KEYS[2]
local idem_key = KEYS[3]
local job_id = ARGV[1]
local handler = ARGV[2]
local payload = ARGV[3]
local content_type = ARGV[4]
local freshness_ms = ARGV[5]
local min_budget_ms = ARGV[6]
local has_idem_key = ARGV[7]
local idempotency_key = ARGV[8]
local idem_ttl_ms = ARGV[9]

if has_idem_key == '1' then
  local prior = redis.call('GET', idem_key)
  if prior then return {'duplicate', prior} end
end
local entry = redis.call('XADD', stream_key, 'NOMKSTREAM', '*', 'id', job_id, 'handler', handler,
  'freshness_ms', freshness_ms, 'min_budget_ms', min_budget_ms)
if not entry then return {'nostream', ''} end
redis.call('HSET', job_key, 'id', job_id, 'handler', handler, 'payload', payload, 'content_type', content_type,
  'freshness_ms', freshness_ms, 'min_budget_ms', min_budget_ms, 'entry', entry, 'state', 'queued', 'deliveries', '0',
  'idempotency_key', idempotency_key)
if has_idem_key == '1' then redis.call('SET', idem_key, job_id, 'PX', idem_ttl_ms) end
return {'accepted', entry}
