--- @include "numbers"
--- @include "groups"

-- Where a ready job waits (docs/protocol.md, "Ready jobs"). Priority 0, the common case: in
-- `<Q>line`, a list in FIFO order (an entry costs its id plus a few bytes; a sorted-set member
-- ~129 B more). Any other priority: in `<Q>ready`, a sorted set by score (priority first, FIFO
-- within). A claim pops the sorted set first, then the line. Cancel and delete leave a line
-- entry where it is (LREM is O(n) in a deep line) and count it in `<Q>lineStale`; the claim
-- skips an entry whose record is not a ready priority-0 job of this queue and takes it off that
-- count, so `ready` = ZCARD + LLEN − stale stays O(1). Both keys are named from `<Q>ready`
-- (same queue prefix, so the same hash tag and slot).
-- (1000 − 0) × 2^42 + 0: where the previous layout's sorted set puts the first job of priority 0
local PRIORITY0_HEAD_SCORE = '4398046511104000'
local function lineKeyOf(readyKey)
  return string.sub(readyKey, 1, #readyKey - 5) .. 'line'
end
local function lineStaleKeyOf(readyKey)
  return string.sub(readyKey, 1, #readyKey - 5) .. 'lineStale'
end

-- Whether a job of this priority (the record's field as stored; nil = absent = 0) waits in the line.
local function inLine(priority)
  local p = tonumber(priority)
  return p == nil or p == 0
end

-- The sorted-set score of a prioritised job: its own when numeric, else a fresh place behind the
-- jobs of its priority (stored, so every later script reads the same).
local function freshScore(jk, id, priority)
  local p = tonumber(priority) or 0
  if p ~= p or p < 0 or p > 1000 then p = 0 end
  -- (jk is `<P>job:<id>`)
  local seqKey = string.sub(jk, 1, #jk - #id - 4) .. 'seq'
  local score = (1000 - math.floor(p)) * 4398046511104 + redis.call('INCR', seqKey)
  redis.call('HSET', jk, 'score', score)
  return score
end

-- Put a job in line. `front`: a job that was running goes back to the head of the line (it was
-- there when it was claimed); anything else (a new job, a delayed job now due, a revived dead
-- letter) joins the tail. A prioritised job takes its score's place. A grouped job goes to its
-- group's line or sorted set instead (groups.lua). `priority`, `score`, `group`: the record's
-- fields when the caller has read them (false: absent; priority nil: all three read here).
local function putReady(readyKey, jk, id, front, priority, score, group)
  if priority == nil then
    local f = redis.call('HMGET', jk, 'priority', 'score', 'group')
    priority, score, group = f[1], f[2], f[3]
  end
  local g = groupOf(group)
  if g then
    local prioritised = not inLine(priority)
    groupPutReady(queuePrefixOfReady(readyKey), g, id, front, prioritised,
      prioritised and (numericScore(score) or freshScore(jk, id, priority)) or nil)
    return
  end
  if inLine(priority) then
    redis.call(front and 'LPUSH' or 'RPUSH', lineKeyOf(readyKey), id)
    return
  end
  redis.call('ZADD', readyKey, numericScore(score) or freshScore(jk, id, priority), id)
end

-- A ready job left the line without its entry (cancel, delete): the entry is stale.
-- `wasQueued`: whether the job was found in the sorted set (then it had no line entry).
local function leftLine(readyKey, wasQueued)
  if not wasQueued then redis.call('INCR', lineStaleKeyOf(readyKey)) end
end

-- How many jobs are ready: both structures less the stale line entries, and the grouped jobs
-- (groups.lua; a queue without groups has no `gwaiting`: HGET on a missing key). O(1).
local function readyCount(readyKey)
  local n = redis.call('ZCARD', readyKey)
  local line = redis.call('LLEN', lineKeyOf(readyKey))
  if line > 0 then
    local stale = tonumber(redis.call('GET', lineStaleKeyOf(readyKey))) or 0
    n = n + math.max(0, line - stale)
  end
  return n + math.max(0, tonumber(redis.call('HGET', queuePrefixOfReady(readyKey) .. 'gwaiting', '')) or 0)
end

-- The id at the head of the ready line (the next to run), or nil. Skips up to 10 stale line
-- entries (their records are not ready jobs of priority 0). Without ungrouped ready jobs: the
-- head of the group next in the ring.
local function readyHead(readyKey, jobPrefix)
  local head = redis.call('ZRANGE', readyKey, 0, 0)[1]
  if head then return head end
  for _, id in ipairs(redis.call('LRANGE', lineKeyOf(readyKey), 0, 9)) do
    local f = redis.pcall('HMGET', jobPrefix .. id, 'state', 'priority', 'group')
    if not f.err and f[1] == 'ready' and inLine(f[2]) and not groupOf(f[3]) then return id end
  end
  local q = queuePrefixOfReady(readyKey)
  -- (the ring's member '' is the queue's own jobs' turn: claimJobs.lua)
  local next2 = redis.call('ZRANGE', q .. 'gring', 0, 1)
  local g = next2[1] == '' and next2[2] or next2[1]
  if g then
    return redis.call('ZRANGE', groupReadyKey(q, g), 0, 0)[1] or redis.call('LINDEX', groupLineKey(q, g), 0) or nil
  end
  return nil
end
