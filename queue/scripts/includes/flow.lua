--- @include "keys"
--- @include "record"
--- @include "readyLine"
--- @include "wake"
--- @include "finished"
--- @include "notify"

-- Flows (docs/flows.md). A flow job's record names its flow (`flow`), its key in it (`flowKey`),
-- its parents' keys (`parents`, space-separated), the ids of the jobs that wait for it
-- (`dependents`, space-separated) and, while it waits, how many parents have not ended
-- (`pending`, state `waiting-children`). A parent has ended when it completes in the queue it
-- ends in (its last stage: an advance is not an end), dies, or is cancelled. The flow's hash
-- (`<P>flow:<id>`) keeps each ended parent's outcome for its dependents: `r:<key>` {id, result}
-- or `e:<key>` {id, error}; `x:<key>` marks a parent whose dependents were told, so an edge is
-- released once even when a dead parent is retried and completes.
-- A flow's hash is kept this long after its last job ended.
local FLOW_KEEP_SECONDS = 7 * 24 * 3600
-- A dependent cancelled by a parent's end is kept as long as a cancel keeps a job (queue/control.ts
-- CANCELLED_RETENTION_SECONDS), then reclaimed by its queue's workers (finished.lua).
local FLOW_CANCELLED_RETENTION_SECONDS = 24 * 3600

local function flowKeyOf(jobPrefix, fid)
  return keyOf.flow(pipelineBase(jobPrefix), fid)
end

-- One job of the flow ended for good (completed, dead, cancelled): the hash expires once none is open.
local function flowJobClosed(fk)
  if redis.call('HINCRBY', fk, 'open', -1) <= 0 then redis.call('EXPIRE', fk, FLOW_KEEP_SECONDS) end
end

-- A waiting dependent of a parent that ended badly, with policy `fail`: cancelled, reason
-- naming the parent (and notified as a cancel is, notify.lua: `jobNotify` its record's `notify`).
local function cancelWaitingChild(jobPrefix, jk, id, queue, now, reason, jobNotify, createdAt)
  local q = queueKeyPrefix(pipelineBase(jobPrefix), queue)
  redis.call('HSET', jk, 'state', 'cancelled', 'cancelledAt', now, 'finishedAt', now, 'cancelReason', reason)
  redis.call('HDEL', jk, 'pending')
  redis.call('EXPIRE', jk, finishedTtl(FLOW_CANCELLED_RETENTION_SECONDS))
  indexFinished(q .. 'finished', now, FLOW_CANCELLED_RETENTION_SECONDS, {id})
  redis.call('HINCRBY', q .. 'counts', 'cancelled', 1)
  redis.call('HINCRBY', q .. 'counts', 'waitingChildren', -1)
  local base = pipelineBase(jobPrefix)
  record(base .. 'outbox', base .. 'meta', {'type', 'cancelled', 'id', id, 'queue', queue, 'at', now, 'was', 'waiting-children', 'reason', reason})
  notifyEnded(base .. 'outbox', base .. 'meta', queue, id, 'cancelled', tostring(now), jobNotify, createdAt, '0', 'error', cjson.encode({message = 'cancelled: ' .. reason}))
end

-- A dependent whose parents have all ended joins its queue's line like any ready job; one with a
-- delay (`delayMs`, its record's) waits it out in `delayed` first, as an enqueue with a delay does.
local function releaseChild(jobPrefix, jk, id, queue, now, priority, score, group, delay)
  local q = queueKeyPrefix(pipelineBase(jobPrefix), queue)
  local base = pipelineBase(jobPrefix)
  redis.call('HINCRBY', q .. 'counts', 'enqueued', 1)
  redis.call('HINCRBY', q .. 'counts', 'waitingChildren', -1)
  local due = tonumber(delay)
  if due and due > 0 then
    due = now + due
    redis.call('HSET', jk, 'state', 'delayed')
    redis.call('HDEL', jk, 'pending', 'delayMs')
    -- (a delayed job keeps a score, as enqueueJob.lua gives it one)
    if not score then freshScore(jk, id, priority) end
    redis.call('ZADD', q .. 'delayed', due, id)
    record(base .. 'outbox', base .. 'meta', {'type', 'promoted', 'id', id, 'queue', queue, 'at', now, 'from', 'flow', 'due', due})
    return
  end
  redis.call('HSET', jk, 'state', 'ready')
  redis.call('HDEL', jk, 'pending')
  putReady(q .. 'ready', jk, id, false, priority or false, score or false, group or false)
  wake(q .. 'wake')
  record(base .. 'outbox', base .. 'meta', {'type', 'promoted', 'id', id, 'queue', queue, 'at', now, 'from', 'flow'})
end

-- A flow job ended: `fid`, `key`, `dependents` its record's flow, flowKey and dependents fields;
-- `id` its id, `outcome` the JSON text its dependents see ({id, result} or {id, error});
-- `failed`: false, 'dead' or 'cancelled'. `hold` (cancel_flow): a dependent whose parents have
-- all ended stays waiting, for the cancel to find it, instead of joining its queue's line first. Each waiting dependent's count drops; at 0 it is released. A failed
-- parent's `fail`-policy dependents are cancelled instead, and theirs in turn (iteratively: a
-- flow is at most 10,000 jobs deep). Returns how many dependents it cancelled.
local function flowJobEnded(jobPrefix, now, fid, key, id, dependents, outcome, failed, hold)
  local fk = flowKeyOf(jobPrefix, fid)
  local work = {{key, id, dependents, outcome, failed}}
  local n, cancelled = 0, 0
  while n < #work do
    n = n + 1
    local w = work[n]
    local pkey, pid, deps, out, bad = w[1], w[2], w[3], w[4], w[5]
    if bad then
      redis.call('HSET', fk, 'e:' .. pkey, out)
    else
      redis.call('HSET', fk, 'r:' .. pkey, out)
      redis.call('HDEL', fk, 'e:' .. pkey)
    end
    flowJobClosed(fk)
    -- (each edge once: a retried dead parent that completes only replaces its outcome)
    if deps and deps ~= '' and redis.call('HSETNX', fk, 'x:' .. pkey, '1') == 1 then
      for did in string.gmatch(deps, '%S+') do
        local djk = jobKey(jobPrefix, did)
        local f = redis.call('HMGET', djk, 'state', 'onParentFailure', 'queue', 'priority', 'score', 'group', 'flowKey', 'dependents', 'delayMs', 'notify', 'createdAt')
        if f[1] == 'waiting-children' then
          if bad and (f[2] or 'fail') == 'fail' then
            local reason = 'parent ' .. pkey .. ' (' .. pid .. ') ' .. (bad == 'cancelled' and 'was cancelled' or 'is dead')
            cancelWaitingChild(jobPrefix, djk, did, f[3], now, reason, f[10], f[11])
            cancelled = cancelled + 1
            work[#work + 1] = {f[7], did, f[8], '{"id":' .. cjson.encode(did) .. ',"error":' .. cjson.encode('cancelled: ' .. reason) .. '}', 'cancelled'}
          elseif redis.call('HINCRBY', djk, 'pending', -1) <= 0 and not hold then
            releaseChild(jobPrefix, djk, did, f[3], now, f[4], f[5], f[6], f[9])
          end
        end
      end
    end
  end
  return cancelled
end

-- A parent's result of more than this many bytes (its JSON) comes by reference in a claim reply:
-- a handler that reads it fetches it from the flow's hash. 1 KiB keeps the small results most
-- joins get (a count, a short string, a few fields) inline, while a join of 10,000 large parents
-- gets a reply of references (docs/flows.md, "Large results").
local FLOW_INLINE_RESULT_BYTES = 1024
-- The most bytes of results one claim reply carries inline; the rest come by reference.
local FLOW_INLINE_TOTAL_BYTES = 64 * 1024

-- The parents' outcomes a claimed flow job sees: JSON {key: {id, result}} (and {id, error} of
-- a parent that died or was cancelled, unless the job's policy is `ignore`); a result over
-- FLOW_INLINE_RESULT_BYTES, or past FLOW_INLINE_TOTAL_BYTES of them, as {id, ref, bytes}
-- (`ref` = `<flow id>:<key>`: the field `r:<key>` of the flow's hash). '' for a job without
-- parents. Read in runs of 1,000 fields (variadic.lua).
local function flowParentsJson(jobPrefix, fid, parents, policy)
  if not parents or parents == '' or not fid then return '' end
  local fk = flowKeyOf(jobPrefix, fid)
  local keys = {}
  for k in string.gmatch(parents, '%S+') do keys[#keys + 1] = k end
  local parts = {}
  local inline = 0
  for i = 1, #keys, 500 do
    local names = {}
    local last = math.min(i + 499, #keys)
    for j = i, last do
      names[#names + 1] = 'r:' .. keys[j]
      names[#names + 1] = 'e:' .. keys[j]
    end
    local v = redis.call('HMGET', fk, unpack(names))
    for j = i, last do
      local r, e = v[2 * (j - i) + 1], v[2 * (j - i) + 2]
      local out = r or (policy ~= 'ignore' and e) or nil
      if r then
        -- (an outcome is {"id":…,"result":<result>}: the id holds no `,"result":`)
        local at = string.find(r, ',"result":', 1, true)
        local bytes = at and #r - at - 10 or 0
        if at and (bytes > FLOW_INLINE_RESULT_BYTES or inline + bytes > FLOW_INLINE_TOTAL_BYTES) then
          out = string.sub(r, 1, at - 1) .. ',"ref":' .. cjson.encode(fid .. ':' .. keys[j]) .. ',"bytes":' .. bytes .. '}'
        else
          inline = inline + bytes
        end
      end
      if out then parts[#parts + 1] = cjson.encode(keys[j]) .. ':' .. out end
    end
  end
  return '{' .. table.concat(parts, ',') .. '}'
end
