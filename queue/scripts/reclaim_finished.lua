-- Reclaim finished jobs whose retention has passed (docs/protocol.md, "Retention"): the records
-- of completed and cancelled jobs, indexed in `<Q>finished` by when they are due. The queue's
-- workers call it after each lease renewal, and again at once while it reports more due, so a
-- backlog of millions is deleted `limit` records per call and no call holds Redis for long.
-- A record is deleted only while its state is `completed` or `cancelled` and its TTL says its
-- retention has passed (PTTL at most the reclaim margin, includes/finished.lua), so an id
-- finished again since (delete, enqueue again, complete) keeps its later retention and nothing of
-- a waiting or running job is touched; an entry whose record is kept longer is indexed again at
-- the record's own due time.
-- KEYS: 1 <Q>finished
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, now (ms), optional limit (ids
--       examined per call, 1–5,000; 500 when left out). A record that is not a JSON object or
--       lacks a field: ERR_INVALID_RECORD naming it, nothing written.
-- Returns name/value pairs reclaimed (records deleted) and more (1 when index entries are still
-- due, else 0).
--- @include "includes/wire"
--- @include "includes/finished"
--- @include "includes/variadic"

local call, bad = wireRecord('reclaim_finished call', ARGV[1])
bad = bad or wireRequire('reclaim_finished call', call, {'jobPrefix', 'string', 'now', 'number'})
bad = bad or wireOptional('reclaim_finished call', call, {'limit', 'number'})
if bad then return redis.error_reply(bad) end
local jobPrefix, now = call.jobPrefix, call.now
local limit = math.max(1, math.min(math.floor(call.limit or 500), 5000))
local marginMs = RECLAIM_MARGIN_SECONDS * 1000
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit, 'WITHSCORES')
local taken, doomed, later = {}, {}, {}
local laterMs, examined = 0, 0
-- (a member past the limit is split: the ids not examined go back as a member of their own)
local rest, restScore
for m = 1, #members, 2 do
  if examined >= limit then break end
  local member = members[m]
  taken[#taken + 1] = member
  for id in string.gmatch(member, '[^ ]+') do
    if examined >= limit then
      rest = rest or {}
      rest[#rest + 1] = id
      restScore = members[m + 1]
    else
      examined = examined + 1
      local jk = jobPrefix .. id
      local ttl = redis.call('PTTL', jk)
      if ttl > marginMs then
        later[#later + 1] = id
        if ttl - marginMs > laterMs then laterMs = ttl - marginMs end
      elseif ttl >= 0 then
        local state = redis.pcall('HGET', jk, 'state')
        if state == 'completed' or state == 'cancelled' then doomed[#doomed + 1] = jk end
      end
      -- (no TTL: not finished, or kept for good; no key: deleted or reclaimed already)
    end
  end
end
if #taken > 0 then callVariadic('ZREM', KEYS[1], taken) end
if rest then redis.call('ZADD', KEYS[1], restScore, table.concat(rest, ' ')) end
if #doomed > 0 then redis.call('UNLINK', unpack(doomed)) end
if #later > 0 then redis.call('ZADD', KEYS[1], now + laterMs, table.concat(later, ' ')) end
local more = redis.call('ZCOUNT', KEYS[1], '-inf', now) > 0 and 1 or 0
return {'reclaimed', #doomed, 'more', more}
