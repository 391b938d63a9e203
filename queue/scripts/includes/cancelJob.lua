--- @include "keys"
--- @include "record"
--- @include "fanIn"
--- @include "readyLine"
--- @include "parkedData"
--- @include "groups"
--- @include "finished"
--- @include "flow"
--- @include "notify"

-- Cancelling jobs (cancel_job.lua, cancel_flow.lua). Waiting (ready) or delayed: a job leaves
-- its set (a line entry stays behind as a stale one, see readyLine.lua). Running: it leaves the
-- in-flight set and its token is cleared, so the worker's renewal reports it cancelled (the
-- handler is aborted) and its late result is refused. Waiting for its parents (a flow job): it
-- is in no set. A fan-out parent: its fan-in record is deleted (the join never runs) and its
-- unfinished children (and a join not yet finished) are cancelled the same way. A flow job's
-- dependents follow their policies (flow.lua). The record stays, state `cancelled`, for
-- `retention` seconds; every cancelled job gets a `cancelled` event.
-- `cx`: {outbox, meta, jobPrefix, now, retention, hold (cancel_flow: released dependents stay waiting)}.
-- Where an unfinished job waits, by state.
local CANCEL_SETS = {ready = 'ready', delayed = 'delayed', active = 'inflight'}
local CANCELLED_ERROR = '{"name":"CancelledError","message":"cancelled"}'
local CANCEL_MAX_DEPTH = 8

-- `f`: the job's HMGET of cancelOne (nil for a fan-out parent: no notification).
local function markCancelled(cx, jk, id, queue, was, token, f)
  local now, retention = cx.now, cx.retention
  redis.call('HSET', jk, 'state', 'cancelled', 'token', '', 'cancelledAt', now, 'finishedAt', now)
  if retention > 0 then
    -- (kept `retention`, then reclaimed by the queue's workers: finished.lua)
    redis.call('EXPIRE', jk, finishedTtl(retention))
    if queue ~= '' then indexFinished(queueKeyPrefix(pipelineBase(cx.jobPrefix), queue) .. 'finished', now, retention, {id}) end
  end
  local fields = {'type', 'cancelled', 'id', id, 'queue', queue, 'at', now, 'was', was}
  if token and token ~= '' then
    fields[#fields + 1] = 'token'
    fields[#fields + 1] = token
  end
  record(cx.outbox, cx.meta, fields)
  if f and queue ~= '' then
    notifyEnded(cx.outbox, cx.meta, queue, id, 'cancelled', tostring(now), f[10], f[11], f[12] or '0', 'error', CANCELLED_ERROR)
  end
end

local cancelTree
-- Returns how many jobs this cancelled (0: finished or missing), the job's state and queue.
local function cancelOne(cx, id, depth)
  local jobPrefix, now = cx.jobPrefix, cx.now
  local base = pipelineBase(jobPrefix)
  local jk = jobKey(jobPrefix, id)
  local f = redis.pcall('HMGET', jk, 'state', 'queue', 'parent', 'token', 'group', 'holdsGroup', 'flow', 'flowKey', 'dependents', 'notify', 'createdAt', 'attemptsMade')
  if f.err or not f[1] then return 0, nil, nil end
  local state, queue = f[1], f[2] or ''
  local set = CANCEL_SETS[state]
  if set or state == 'waiting-children' then
    local q = queueKeyPrefix(base, queue)
    if state == 'waiting-children' then
      redis.call('HINCRBY', q .. 'counts', 'waitingChildren', -1)
      redis.call('HDEL', jk, 'pending')
    else
      local removed = redis.call('ZREM', q .. set, id)
      local g = groupOf(f[5])
      if g and state == 'ready' then
        -- (a grouped job: off its group's set or, in its group's line, left stale; groups.lua)
        groupCancelledWaiting(q, g, id)
      elseif g and state == 'active' then
        groupLeftRunning(q, g)
      elseif g and f[6] == '1' then
        -- (a sequenced retry waiting for its backoff held its group's slot)
        groupHeldReleased(q, g, jk)
      elseif state == 'ready' then
        -- A ready job not in the sorted set waits in the line: its entry stays, counted stale.
        leftLine(q .. set, removed == 1)
      end
      if state ~= 'active' then unparkData(jk, id) end
    end
    redis.call('HINCRBY', q .. 'counts', 'cancelled', 1)
    markCancelled(cx, jk, id, queue, state, state == 'active' and f[4] or nil, f)
    -- A fan-out child cancelled on its own: the join still runs, with this child's outcome.
    if f[3] and f[3] ~= '' then
      finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"error":' .. CANCELLED_ERROR .. '}', now, f[3])
    end
    local n = 1
    if f[7] then
      n = n + flowJobEnded(jobPrefix, now, f[7], f[8], id, f[9], '{"id":' .. cjson.encode(id) .. ',"error":"cancelled"}', 'cancelled', cx.hold)
    end
    return n, state, queue
  end
  if (state == 'fannedOut' or state == 'joined') and depth < CANCEL_MAX_DEPTH then
    local n = cancelTree(cx, jk, id, queue, state, depth)
    -- (a flow job whose join was not enqueued yet ends here; a join carries its flow fields and ends itself)
    if f[7] and state == 'fannedOut' then
      n = n + flowJobEnded(jobPrefix, now, f[7], f[8], id, f[9], '{"id":' .. cjson.encode(id) .. ',"error":"cancelled"}', 'cancelled', cx.hold)
    end
    return n, state, queue
  end
  return 0, state, queue
end

-- A fan-out parent: no join, and its unfinished children (and join) cancelled.
cancelTree = function(cx, jk, parent, queue, state, depth)
  local fk = pipelineBase(cx.jobPrefix) .. 'fanin:' .. parent
  local total = tonumber(redis.call('HGET', fk, 'total'))
  redis.call('DEL', fk)
  local n = 0
  for i = 1, total or 0 do n = n + (cancelOne(cx, parent .. ':' .. i, depth + 1)) end
  n = n + (cancelOne(cx, parent .. ':join', depth + 1))
  if total or n > 0 then markCancelled(cx, jk, parent, queue, state, nil) end
  return n
end
