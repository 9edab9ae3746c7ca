-- list: one page of job ids along the index that holds a state's jobs, so
-- that the cursor is a position in that index and stays valid while jobs
-- move: a job that stays in the index for the whole walk is listed exactly
-- once, whatever else is added, moved or removed meanwhile. The caller reads
-- each job's hash and keeps those in the state it asked for.
--
-- KEYS[1] index_key   hg:{Q}:stream (queued and running jobs, by entry id),
--                     hg:{Q}:delayed (scheduled ones, by due time then id) or
--                     hg:{Q}:dead (dead-lettered ones, by entry id)
-- ARGV[1] kind        'stream' (KEYS[1] a stream) or 'zset'
-- ARGV[2] cursor      '' from the start; else the previous page's next cursor:
--                     an entry id, or '<due ms>:<job id>'
-- ARGV[3] count       index positions to read (the page holds at most as many ids)
--
-- Reply {next_cursor, id, id, ...}; next_cursor '' once the index is read to
-- its end. A stream entry's job id is its `id` field.
local index_key = KEYS[1]
local kind, cursor, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {''}

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
