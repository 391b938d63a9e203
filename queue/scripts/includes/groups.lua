--- @include "keys"
--- @include "wake"

-- Groups (docs/protocol.md, "Groups"): a job may carry a `group` (a tenant, a customer, a key).
-- A grouped job waits in its group's own line, `<Q>g:<group>:line` (priority 0, FIFO) or
-- `<Q>g:<group>:ready` (a sorted set by score, other priorities), never in `<Q>line`/`<Q>ready`.
-- Per queue: `<Q>gring`, a sorted set of the groups that have waiting work and may be admitted,
-- scored by turn (the claim pops the lowest, takes one job and puts the group back at the tail:
-- round-robin, O(log G)); `<Q>gwaiting`, group → how many of its jobs wait (field '' = all
-- groups together, for an O(1) `ready`); `<Q>grunning`, group → how many of its jobs hold a
-- lease; `<Q>gcontrol`, the limits (`concurrency` for every group, `concurrency:<g>` one
-- group's, `paused:<g>`). An idle group keeps only its `gcontrol` fields: its lines empty (and
-- are deleted: a count of 0 means any entry left is stale), its counters are deleted at 0.
-- Every key is named from the queue prefix `q` (`<Q>`): the same hash tag, so the same slot.
-- A queue without groups never touches any of these keys.
local GROUP_MAX_BYTES = 128
local function groupLineKey(q, g)
  return q .. 'g:' .. g .. ':line'
end
local function groupReadyKey(q, g)
  return q .. 'g:' .. g .. ':ready'
end
local function groupRateLogKey(q, g)
  return q .. 'g:' .. g .. ':rlog'
end
local function queuePrefixOfReady(readyKey)
  return string.sub(readyKey, 1, #readyKey - 5)
end

-- Ring scores from RING_WAIT up are groups waiting for their rate window: RING_WAIT + the time
-- (ms) it has room again. Turns stay far below; RING_WAIT + any time this century < 2^53.
local RING_WAIT = 1125899906842624 -- 2^50

-- Put the group at the tail of the ring unless it is already in it (taking turns, or waiting
-- for its window).
local function ringAdd(q, g)
  local ring = q .. 'gring'
  if redis.call('ZSCORE', ring, g) then return end
  local last = redis.call('ZREVRANGEBYSCORE', ring, '(' .. RING_WAIT, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  redis.call('ZADD', ring, last[2] and (tonumber(last[2]) + 1) or 0, g)
end

-- A job of group g became ready (enqueue, promotion, requeue): into the group's line (`front`:
-- at its head) or, prioritised, its sorted set; counted waiting; the group joins the ring when
-- it had nothing waiting (else it is in the ring already, or blocked and re-admitted by what
-- unblocks it: groupLeftRunning, resume, a limit change).
local function groupPutReady(q, g, id, front, prioritised, score)
  if prioritised then
    redis.call('ZADD', groupReadyKey(q, g), score, id)
  else
    redis.call(front and 'LPUSH' or 'RPUSH', groupLineKey(q, g), id)
  end
  local waiting = q .. 'gwaiting'
  redis.call('HINCRBY', waiting, '', 1)
  if redis.call('HINCRBY', waiting, g, 1) == 1 then ringAdd(q, g) end
end

-- `n` waiting jobs of group g stopped waiting (claimed, dead-lettered at the claim, cancelled,
-- deleted). At 0 the group's lines hold only stale entries: deleted, so an idle group keeps nothing.
local function groupLeftWaiting(q, g, n)
  local waiting = q .. 'gwaiting'
  if redis.call('HINCRBY', waiting, '', -n) <= 0 then redis.call('HDEL', waiting, '') end
  local left = redis.call('HINCRBY', waiting, g, -n)
  if left <= 0 then
    redis.call('HDEL', waiting, g)
    redis.call('DEL', groupLineKey(q, g), groupReadyKey(q, g))
  end
  return left
end

-- A waiting job of group g was cancelled or deleted: off the group's sorted set (a line entry
-- stays, stale: the claim skips it), uncounted.
local function groupCancelledWaiting(q, g, id)
  redis.call('ZREM', groupReadyKey(q, g), id)
  groupLeftWaiting(q, g, 1)
end

-- A job of group g stopped holding a lease (settled, failed, handed back, swept, cancelled):
-- its slot is free, so a group with waiting work goes back in the ring and a consumer is woken.
-- (Called exactly once per claim: every such path first checks and clears the lease.)
local function groupLeftRunning(q, g)
  local running = q .. 'grunning'
  if redis.call('HINCRBY', running, g, -1) <= 0 then redis.call('HDEL', running, g) end
  if tonumber(redis.call('HGET', q .. 'gwaiting', g) or 0) > 0 then
    ringAdd(q, g)
    wake(q .. 'wake')
  end
end

-- The queue prefix `<Q>` from a script's job prefix and queue name.
local function groupQueuePrefix(jobPrefix, queue)
  return queueKeyPrefix(pipelineBase(jobPrefix), queue)
end

-- The implicit group of jobs with `uses` and no group of their own (docs/protocol.md, "Resources").
local function isResourceGroup(g)
  return g ~= nil and g ~= false and string.sub(g, 1, 5) == '~res:'
end

-- The job record's `group` field as the scripts pass it: nil when absent or empty.
local function groupOf(field)
  if field and field ~= '' then return field end
  return nil
end
