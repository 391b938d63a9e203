--- @include "keys"
--- @include "wake"

-- Groups (docs/protocol.md, "Groups"): a job may carry a `group` (a tenant, a customer, a key).
-- A grouped job waits in its group's own line, `<Q>g:<group>:line` (priority 0, FIFO) or
-- `<Q>g:<group>:ready` (a sorted set by score, other priorities), never in `<Q>line`/`<Q>ready`.
-- Per queue: `<Q>gring`, a sorted set of the groups that have waiting work and may be admitted,
-- scored by turn (the claim pops the lowest, takes one job and puts the group back at the tail:
-- round-robin, O(log G)); `<Q>gwaiting`, group → how many of its jobs wait (field '' = all
-- groups together, for an O(1) `ready`); `<Q>grunning`, group → how many of its jobs hold a
-- lease; `<Q>gnames`, the groups with waiting jobs by name (score 0: ZRANGEBYLEX pages a
-- listing); `<Q>gcontrol`, the limits (`concurrency` for every group, `concurrency:<g>` one
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

-- `<P>meta` field `groups:<queue>` = '1' while grouped jobs wait in the queue: the claim reads it
-- in the HMGET of `<P>meta` a settle makes anyway (record.lua readMeta), and then serves the
-- queue's ungrouped jobs as one more participant of the round-robin (claimJobs.lua). Written
-- only when the count of all groups' waiting jobs goes from 0 to 1 and back.
local function groupsWaitingFlag(q, on)
  local base, queue = string.match(q, '^(.*}:)q:(.+):$')
  if not base then return end
  if on then
    redis.call('HSET', base .. 'meta', 'groups:' .. queue, '1')
  else
    redis.call('HDEL', base .. 'meta', 'groups:' .. queue)
  end
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
  if redis.call('HINCRBY', waiting, '', 1) == 1 then groupsWaitingFlag(q, true) end
  if redis.call('HINCRBY', waiting, g, 1) == 1 then
    ringAdd(q, g)
    -- (`<Q>gnames`: the groups with waiting jobs by name, for listings paged in O(log G))
    redis.call('ZADD', q .. 'gnames', 0, g)
  end
end

-- `n` waiting jobs of group g stopped waiting (claimed, dead-lettered at the claim, cancelled,
-- deleted). At 0 the group's lines hold only stale entries: deleted, so an idle group keeps nothing.
local function groupLeftWaiting(q, g, n)
  local waiting = q .. 'gwaiting'
  if redis.call('HINCRBY', waiting, '', -n) <= 0 then
    redis.call('HDEL', waiting, '')
    groupsWaitingFlag(q, false)
  end
  local left = redis.call('HINCRBY', waiting, g, -n)
  if left <= 0 then
    redis.call('HDEL', waiting, g)
    redis.call('DEL', groupLineKey(q, g), groupReadyKey(q, g))
    redis.call('ZREM', q .. 'gnames', g)
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
-- (Called exactly once per claim: every such path first checks and clears the lease.) `n`: how
-- many of its jobs did (a settle of several: settleJobs.lua tallies them per group), default 1.
local function groupLeftRunning(q, g, n)
  local running = q .. 'grunning'
  if redis.call('HINCRBY', running, g, -(n or 1)) <= 0 then redis.call('HDEL', running, g) end
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

-- Sequences (docs/protocol.md, "Sequences"): a group whose concurrency limit is 1 (its override,
-- else the queue's default) runs its jobs strictly one after another. A retry of such a group's
-- job keeps the group's slot while it waits for its backoff (the record's `holdsGroup` = '1'),
-- so no later job of the group starts in between; when it is due it goes back to the head of the
-- group's line and only then frees the slot (groupHeldReady), so it runs next. `onDead:<g>` /
-- `onDead` = 'block': a job of the group that dies pauses the group (`paused:<g>`, and
-- `blockedBy:<g>` = its id) until it is retried from the dead letters or the group is resumed;
-- otherwise ('continue', the default) the next job runs. One HMGET of the group's settings.
local function groupSequence(q, g)
  local c = redis.call('HMGET', q .. 'gcontrol', 'concurrency:' .. g, 'concurrency', 'onDead:' .. g, 'onDead')
  return (tonumber(c[1]) or tonumber(c[2])) == 1, (c[3] or c[4]) == 'block'
end

-- A job of group g died (fail_job, the sweeper's poison-pill guard): with onDead 'block' the
-- group is paused, blocked by it. (Its slot was freed by groupLeftRunning: a paused group's
-- claim drops it at its next turn.)
local function groupJobDied(q, g, id)
  local _, block = groupSequence(q, g)
  if block then redis.call('HSET', q .. 'gcontrol', 'paused:' .. g, '1', 'blockedBy:' .. g, id) end
end

-- A sequenced retry that held its group's slot became ready (promoted, or promoted early) or
-- left (cancelled, deleted): the hold ends, the slot is free.
local function groupHeldReleased(q, g, jk)
  redis.call('HDEL', jk, 'holdsGroup')
  groupLeftRunning(q, g)
end

-- Weights (docs/protocol.md, "Weights"): a group of weight w (`weight:<g>` in gcontrol) takes w
-- turns in a row — the claim puts it back at its own place at the head of the ring instead of the
-- tail until it used them — so it gets w jobs per round to a group of weight 1's one, also when
-- every claim takes one job. `<Q>gturns`, group → turns used in the current round, is written
-- only for weighted groups, and the field is deleted when the round ends or the group empties.
local function groupTurnsUsed(q, g)
  return tonumber(redis.call('HGET', q .. 'gturns', g)) or 0
end
local function groupTurnsKeep(q, g, used, weight)
  if used > 0 and used < weight then
    redis.call('HSET', q .. 'gturns', g, used)
  else
    redis.call('HDEL', q .. 'gturns', g)
  end
end
