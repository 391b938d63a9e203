-- Move dead-lettered jobs back to ready with fresh attempt and stall budgets.
-- KEYS: 1 dead, 2 ready, 3 counts, 4 wake, 5 outbox, 6 meta
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, now (ms), optional
--       limit; 2… the ids, or none: the oldest `limit` (required then). A record that is not a
--       JSON object or lacks a field: ERR_INVALID_RECORD naming it.
-- A job that blocked its group (a sequence that stops at a dead job) goes back to the head of
-- its group, which is resumed.
-- Returns the number of jobs moved; entries without a usable record (no data, no numeric
-- score, not a hash) stay dead.
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/numbers"
--- @include "includes/record"
--- @include "includes/wake"
--- @include "includes/readyLine"

local call, bad = wireRecord('retry_dead call', ARGV[1])
bad = bad or wireRequire('retry_dead call', call, {'jobPrefix', 'string', 'queue', 'string', 'now', 'number'})
if not bad and #ARGV == 1 and type(call.limit) ~= 'number' then
  bad = 'ERR_INVALID_RECORD retry_dead call: field limit must be a number when no ids follow, got ' .. (call.limit == nil and 'none' or type(call.limit))
end
if bad then return redis.error_reply(bad) end
local jobPrefix, queue, now = call.jobPrefix, call.queue, call.now
local ids = {}
if #ARGV > 1 then
  for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[1], 0, call.limit - 1)
end
local moved = 0
for _, id in ipairs(ids) do
  local jk = jobKey(jobPrefix, id)
  -- checked before anything changes: a record another client broke stays dead, never lost
  local f = redis.pcall('HMGET', jk, 'data', 'score', 'priority', 'group', 'attemptsMade', 'attemptsBefore', 'flow')
  -- (a priority-0 job joins the tail of the line and needs no score)
  local score = (not f.err) and (inLine(f[3]) or numericScore(f[2]))
  if redis.call('ZSCORE', KEYS[1], id) and not f.err and f[1] and score then
    redis.call('ZREM', KEYS[1], id)
    -- A fresh attempt budget; the attempts already made stay counted in `attemptsBefore`.
    local before = (tonumber(f[5]) or 0) + (tonumber(f[6]) or 0)
    if before > 0 then
      redis.call('HSET', jk, 'state', 'ready', 'attemptsMade', 0, 'attemptsBefore', before, 'stalls', 0, 'deadReason', '', 'token', '')
    else
      redis.call('HSET', jk, 'state', 'ready', 'attemptsMade', 0, 'stalls', 0, 'deadReason', '', 'token', '')
    end
    local g = groupOf(f[4])
    local q = g and queuePrefixOfReady(KEYS[2])
    -- (the job that blocked its group (onDead 'block', groups.lua) goes back to the head of the
    -- group, and the group is resumed: its sequence goes on from this job)
    local blocking = g and redis.call('HGET', q .. 'gcontrol', 'blockedBy:' .. g) == id
    putReady(KEYS[2], jk, id, blocking, f[3], f[2], f[4])
    if blocking then
      redis.call('HDEL', q .. 'gcontrol', 'paused:' .. g, 'blockedBy:' .. g)
      ringAdd(q, g)
    end
    -- (a flow job is open again: its flow's hash is kept until it ends, docs/flows.md)
    if f[7] then
      local fk = keyOf.flow(pipelineBase(jobPrefix), f[7])
      redis.call('HINCRBY', fk, 'open', 1)
      redis.call('PERSIST', fk)
    end
    record(KEYS[5], KEYS[6], {'type', 'enqueued', 'id', id, 'queue', queue, 'at', now, 'from', 'dead', 'data', f[1]})
    moved = moved + 1
  end
end
if moved > 0 then
  redis.call('HINCRBY', KEYS[3], 'revived', moved)
  wake(KEYS[4])
end
return moved
