-- Reclaiming finished jobs (docs/protocol.md, "Retention"). A completed or cancelled job's record
-- is kept `retention` seconds; Conveyor's workers then delete it in bounded batches
-- (reclaim_finished.lua) instead of leaving millions of keys to Redis' expiry cycle, which at
-- the default `hz 10` blocks for up to 25 ms at a time while many keys are due.
-- `<Q>finished` indexes them: one member per settle call (the ids it finished, joined by a
-- space), scored by when they are due (ms). The record's own TTL stays the source of truth: it
-- is `retention + RECLAIM_MARGIN_SECONDS`, so Redis still expires it an hour after it was due if
-- no worker of the queue runs to reclaim it, and the reclaimer deletes a record only when its
-- TTL says retention has passed (PTTL <= the margin).
local RECLAIM_MARGIN_SECONDS = 3600

local function finishedKeyOf(inflightKey)
  return string.sub(inflightKey, 1, #inflightKey - 8) .. 'finished'
end

-- A finished record kept `retention` (> 0) seconds gets this TTL (EXPIRE) and its id a place in
-- the index: indexFinished, one ZADD per script call for every id it finished.
local function finishedTtl(retention)
  return retention + RECLAIM_MARGIN_SECONDS
end
local function indexFinished(finishedKey, now, retention, ids)
  if #ids == 0 then return end
  redis.call('ZADD', finishedKey, now + retention * 1000, table.concat(ids, ' '))
end
