-- Cancel a job wherever it is. Waiting (ready) or delayed: it leaves its set (a line entry stays
-- behind as a stale one, see includes/readyLine.lua). Running: it leaves
-- the in-flight set and its token is cleared, so the worker's renewal reports it cancelled (the
-- handler is aborted) and its late result is refused. A fan-out parent: its fan-in record is
-- deleted (the join never runs) and its unfinished children (and a join not yet finished) are
-- cancelled the same way. The record stays, state `cancelled`, for `retentionSeconds`; every
-- cancelled job gets a `cancelled` event. A finished job (completed, dead, cancelled) is left as it is.
-- KEYS: 1 outbox, 2 meta (the pipeline's)
-- ARGV: 1 jobPrefix, 2 id, 3 now (ms), 4 retentionSeconds (0 = keep the record)
-- Returns {outcome, state, queue, jobsCancelled}: outcome 'cancelled' (state: what the job was —
-- ready, delayed, active, fannedOut, joined), 'finished' (state: completed, dead, cancelled…;
-- nothing changed) or 'notFound'.
--- @include "includes/keys"
--- @include "includes/record"
--- @include "includes/fanIn"
--- @include "includes/readyLine"
--- @include "includes/parkedData"
--- @include "includes/groups"
--- @include "includes/finished"

local jobPrefix, now, retention = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local base = pipelineBase(jobPrefix)
-- Where an unfinished job waits, by state.
local SETS = {ready = 'ready', delayed = 'delayed', active = 'inflight'}
local CANCELLED = '{"name":"CancelledError","message":"cancelled"}'
local MAX_DEPTH = 8

local function markCancelled(jk, id, queue, was, token)
  redis.call('HSET', jk, 'state', 'cancelled', 'token', '', 'cancelledAt', now, 'finishedAt', now)
  if retention > 0 then
    -- (kept `retention`, then reclaimed by the queue's workers: finished.lua)
    redis.call('EXPIRE', jk, finishedTtl(retention))
    if queue ~= '' then indexFinished(queueKeyPrefix(base, queue) .. 'finished', now, retention, {id}) end
  end
  local fields = {'type', 'cancelled', 'id', id, 'queue', queue, 'at', now, 'was', was}
  if token and token ~= '' then
    fields[#fields + 1] = 'token'
    fields[#fields + 1] = token
  end
  record(KEYS[1], KEYS[2], fields)
end

local cancelTree
-- Returns how many jobs this cancelled (0: finished or missing), the job's state and queue.
local function cancelOne(id, depth)
  local jk = jobKey(jobPrefix, id)
  local f = redis.pcall('HMGET', jk, 'state', 'queue', 'parent', 'token', 'group', 'holdsGroup')
  if f.err or not f[1] then return 0, nil, nil end
  local state, queue = f[1], f[2] or ''
  local set = SETS[state]
  if set then
    local q = queueKeyPrefix(base, queue)
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
    redis.call('HINCRBY', q .. 'counts', 'cancelled', 1)
    markCancelled(jk, id, queue, state, state == 'active' and f[4] or nil)
    -- A fan-out child cancelled on its own: the join still runs, with this child's outcome.
    if f[3] and f[3] ~= '' then
      finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"error":' .. CANCELLED .. '}', now, f[3])
    end
    return 1, state, queue
  end
  if (state == 'fannedOut' or state == 'joined') and depth < MAX_DEPTH then
    return cancelTree(jk, id, queue, state, depth), state, queue
  end
  return 0, state, queue
end

-- A fan-out parent: no join, and its unfinished children (and join) cancelled.
cancelTree = function(jk, parent, queue, state, depth)
  local fk = base .. 'fanin:' .. parent
  local total = tonumber(redis.call('HGET', fk, 'total'))
  redis.call('DEL', fk)
  local n = 0
  for i = 1, total or 0 do n = n + (cancelOne(parent .. ':' .. i, depth + 1)) end
  n = n + (cancelOne(parent .. ':join', depth + 1))
  if total or n > 0 then markCancelled(jk, parent, queue, state, nil) end
  return n
end

local n, state, queue = cancelOne(ARGV[2], 0)
if state == nil then return {'notFound', '', '', 0} end
if n > 0 or state == 'fannedOut' and redis.call('HGET', jobKey(jobPrefix, ARGV[2]), 'state') == 'cancelled' then
  return {'cancelled', state, queue, n}
end
return {'finished', state, queue, 0}
