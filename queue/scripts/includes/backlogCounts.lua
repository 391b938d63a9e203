--- @include "readyLine"

-- When the oldest ready job was enqueued (its createdAt), looking at the head of each place a
-- ready job waits — `<Q>ready` (prioritised), `<Q>line` (priority 0, FIFO) and the group next in
-- the ring — and taking the earliest: O(1), a few commands. Approximate where an exact answer
-- is not O(1): the prioritised set is ordered by priority first (an older job of a lower
-- priority is not seen), and of the groups only the one whose turn is next is looked at (the
-- exact oldest across groups is O(G)). 0 when nothing is ready or no head has a createdAt.
local function oldestReadyCreatedAt(readyKey, jobPrefix)
  local oldest = 0
  local function consider(id)
    if not id then return end
    local at = tonumber(redis.pcall('HGET', jobPrefix .. id, 'createdAt')) or 0
    if at > 0 and (oldest == 0 or at < oldest) then oldest = at end
  end
  consider(redis.call('ZRANGE', readyKey, 0, 0)[1])
  for _, id in ipairs(redis.call('LRANGE', lineKeyOf(readyKey), 0, 9)) do
    local f = redis.pcall('HMGET', jobPrefix .. id, 'state', 'priority', 'group')
    if not f.err and f[1] == 'ready' and inLine(f[2]) and not groupOf(f[3]) then
      consider(id)
      break
    end
  end
  local q = queuePrefixOfReady(readyKey)
  -- (the ring's member '' is the queue's own jobs' turn, not a group: claimJobs.lua)
  local next2 = redis.call('ZRANGE', q .. 'gring', 0, 1)
  local g = next2[1] == '' and next2[2] or next2[1]
  if g then
    consider(redis.call('ZRANGE', groupReadyKey(q, g), 0, 0)[1])
    consider(redis.call('LINDEX', groupLineKey(q, g), 0) or nil)
  end
  return oldest
end

-- One queue's counts for scaling (backlog_counts.lua), O(1): {ready (the sorted set and the
-- line, readyLine.lua), delayed, dueDelayed, inflight, dead, completed, oldestReadyCreatedAt,
-- enqueued, budget, ended, runMs, waitingChildren}; oldestReadyCreatedAt is 0 when nothing is ready (see above); enqueued is the
-- queue's lifetime enqueue counter (`<Q>counts` field, read in the same HMGET as completed),
-- whose growth between two polls is the arrival rate; budget, the waiting jobs no resource key
-- can pay for now (docs/protocol.md, "Resources"; not in ready); ended and runMs, the attempts
-- that ended (completed or failed) and their run time, lifetime counters whose growth gives the
-- mean time a job holds a slot; waitingChildren, the flow jobs waiting for their parents (not
-- ready, not in the backlog: docs/flows.md).
local function backlogCounts(readyKey, delayedKey, inflightKey, deadKey, countsKey, now, jobPrefix)
  local ready, budget = readyCount(readyKey)
  local delayed = redis.call('ZCARD', delayedKey)
  local due = 0
  if delayed > 0 then due = redis.call('ZCOUNT', delayedKey, '-inf', now) end
  local inflight = redis.call('ZCARD', inflightKey)
  local dead = redis.call('ZCARD', deadKey)
  local c = redis.call('HMGET', countsKey, 'completed', 'enqueued', 'failed', 'runMs', 'waitingChildren')
  local completed = tonumber(c[1] or 0) or 0
  local enqueued = tonumber(c[2] or 0) or 0
  local ended = completed + (tonumber(c[3] or 0) or 0)
  local runMs = tonumber(c[4] or 0) or 0
  local oldest = 0
  if ready > 0 then oldest = oldestReadyCreatedAt(readyKey, jobPrefix) end
  return {ready, delayed, due, inflight, dead, completed, oldest, enqueued, budget, ended, runMs, tonumber(c[5] or 0) or 0}
end

-- backlogCounts' values by name (backlog_counts' and poll_queues' replies): oldestReadyAt left
-- out when nothing ready has a createdAt.
local function backlogCountsNamed(c)
  local out = {'ready', c[1], 'delayed', c[2], 'dueDelayed', c[3], 'inflight', c[4], 'dead', c[5],
    'completed', c[6], 'enqueued', c[8], 'waitingForBudget', c[9], 'ended', c[10], 'runMs', c[11],
    'waitingChildren', c[12]}
  if c[7] > 0 then
    out[#out + 1] = 'oldestReadyAt'
    out[#out + 1] = c[7]
  end
  return out
end
