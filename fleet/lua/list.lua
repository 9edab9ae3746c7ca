-- list: one page of job ids along the index that holds a state's jobs, so
-- that the cursor is a position in that index and stays valid while jobs
-- move: a job that stays in the index for the whole walk is listed exactly
-- once, whatever else is added, moved or removed meanwhile. The caller reads
-- each job's hash and keeps those in the state it asked for.
--
-- States without an index (the final ones, 'waiting', any) are walked with
-- SCAN over the queue's job hashes ('scan'), filtered here on each hash's
-- state, so a page carries only the jobs asked for: a few waiting jobs
-- among thousands of finished ones are found in one call, not one page of
-- SCAN at a time. A call has SCAN look at about 10,000 keys in all (a few
-- ms of Redis, however many other keys the node holds) and answers with the
-- cursor where it stopped.
--
-- KEYS[1] index_key   hg:{Q}:stream (queued and running jobs, by entry id;
--                     for 'scan' it only names the queue), hg:{Q}:delayed
--                     (scheduled ones, by due time then id) or hg:{Q}:dead
--                     (dead-lettered ones, by entry id)
-- ARGV[1] kind        'stream' (KEYS[1] a stream), 'zset' or 'scan'
-- ARGV[2] cursor      '' from the start; else the previous page's next cursor:
--                     an entry id, '<due ms>:<job id>' or a SCAN cursor
-- ARGV[3] count       index positions to read (the page holds at most as many
--                     ids); 'scan': ids to find (SCAN may return a few more)
-- scan: ARGV[4] filter  '*' (any state), 'finished' (any final state) or a state
--
-- Reply {next_cursor, id, id, ...}; next_cursor '' once the index is read to
-- its end. A stream entry's job id is its `id` field.
local index_key = KEYS[1]
local kind, cursor, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {''}
-- @include states

if kind == 'stream' then
  local start = '-'
  if cursor ~= '' then start = '(' .. cursor end
  local entries = redis.call('XRANGE', index_key, start, '+', 'COUNT', count)
  for _, e in ipairs(entries) do
    local f = e[2]
    for k = 1, #f, 2 do
      if f[k] == 'id' then
        table.insert(out, f[k + 1])
        break
      end
    end
  end
  if #entries == count then out[1] = entries[#entries][1] end
  return out
end

if kind == 'scan' then
  local filter = ARGV[4]
  local prefix = string.sub(index_key, 1, #index_key - #'stream') .. 'job:'
  -- the queue's name may hold glob characters: matched literally
  local pattern = string.gsub(prefix, '[%*%?%[%]\\]', '\\%0') .. '*'
  local at = cursor == '' and '0' or cursor
  local found = 0
  -- SCAN's COUNT is the keys it looks at, matching or not: 10,000 a call in all
  local budget = 10000
  repeat
    local look = math.max(count - found, 10)
    budget = budget - look
    local page = redis.call('SCAN', at, 'MATCH', pattern, 'COUNT', look)
    at = page[1]
    for _, key in ipairs(page[2]) do
      local keep = string.sub(key, 1, #prefix) == prefix
      if keep and filter ~= '*' then
        local state = redis.call('HGET', key, 'state')
        if filter == 'finished' then keep = state and not unfinished(state) else keep = state == filter end
      end
      if keep then
        table.insert(out, string.sub(key, #prefix + 1))
        found = found + 1
      end
    end
  until at == '0' or found >= count or budget <= 0
  if at ~= '0' then out[1] = at end
  return out
end

-- zset: from (score, member) on, ties ordered by member as Redis orders them
local score, member = '-inf', nil
if cursor ~= '' then
  local s, m = string.match(cursor, '^(%d+):(%x+)$')
  if not s then return redis.error_reply('list: bad cursor') end
  score, member = s, m
end
local ties = 0
if member then ties = redis.call('ZCOUNT', index_key, score, score) end
local page = redis.call('ZRANGE', index_key, score, '+inf', 'BYSCORE', 'LIMIT', 0, count + ties, 'WITHSCORES')
local read = 0
local last_score, last_member
for k = 1, #page, 2 do
  local m, s = page[k], page[k + 1]
  if not (member and s == score and m <= member) then
    if read == count then break end
    table.insert(out, m)
    read = read + 1
    last_score, last_member = s, m
  end
end
if read == count then out[1] = last_score .. ':' .. last_member end
return out
