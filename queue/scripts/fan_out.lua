-- Complete a job by fanning it out: its children (one per element of the handler's result) are
-- enqueued into the next stage, and a fan-in record waits for all of them; the child that
-- finishes last enqueues the join job (see finishChild in includes/fanIn.lua). One atomic step, all
-- keys in the pipeline's slot.
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta, 5 nextReady, 6 nextCounts, 7 nextWake, 8 seq,
--       9 nextContract (`<N>contract`)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, id, token, now (ms),
--       nextQueue, joinQueue, children (their number); optional joinTrace (the W3C trace context
--       the join is created in; none = the job's own), traced (true: a trace context per child
--       follows the children's data), contract (the hash of the next stage's contract the caller
--       checked the children's data against; none when it has none); then one child data (JSON
--       text) per child [, one trace per child]. A record that is not a JSON object, lacks a
--       field or does not match the texts that follow: ERR_INVALID_RECORD naming it.
-- Returns the number of children, or -1 when the lease was lost (-2 when the job was cancelled);
-- ERR_CONTRACT_CHANGED <hash in force> when `contract` is not `<N>contract`'s hash: nothing
-- written (the caller re-reads that contract, checks again and retries).
-- The children of a grouped job are jobs of its group in the next stage (docs/protocol.md, "Groups").
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/lease"
--- @include "includes/record"
--- @include "includes/wake"
--- @include "includes/fanIn"
--- @include "includes/groups"

local call, bad = wireRecord('fan_out call', ARGV[1])
bad = bad or wireRequire('fan_out call', call, {'jobPrefix', 'string', 'queue', 'string', 'id', 'string', 'token', 'string',
  'now', 'number', 'nextQueue', 'string', 'joinQueue', 'string', 'children', 'number'})
local n = call and call.children
if not bad and #ARGV ~= 1 + n * (call.traced and 2 or 1) then
  bad = 'ERR_INVALID_RECORD fan_out call: ' .. n .. ' children' .. (call.traced and ' with traces' or '') .. ' need ' ..
    n * (call.traced and 2 or 1) .. ' texts after the record, got ' .. (#ARGV - 1)
end
if bad then return redis.error_reply(bad) end
local jobPrefix, queue, id, token, now = call.jobPrefix, call.queue, call.id, call.token, call.now
local nextQueue, joinQueue = call.nextQueue, call.joinQueue
local inForce = redis.call('HGET', KEYS[9], 'hash') or ''
if inForce ~= (call.contract or '') then return redis.error_reply('ERR_CONTRACT_CHANGED ' .. inForce) end
local jk = jobKey(jobPrefix, id)
local problem = leaseProblem(jk, token)
if problem == 'cancelled' then return -2 end
if problem then
  redis.call('HINCRBY', KEYS[2], 'fenced', 1)
  return -1
end
local f = redis.call('HMGET', jk, 'priority', 'attempts', 'trace', 'group')
local priority = tonumber(f[1]) or 0
local attempts = f[2] or '3'
local ownTrace = f[3] or ''
local joinTrace = call.joinTrace or ownTrace
redis.call('ZREM', KEYS[1], id)
local group = groupOf(f[4])
if group then groupLeftRunning(groupQueuePrefix(jobPrefix, queue), group) end
-- (children of a job with `uses` are not budgeted: its implicit resource group stays behind)
if isResourceGroup(group) then group = nil end
redis.call('HINCRBY', KEYS[2], 'completed', 1)
redis.call('HSET', jk, 'state', 'fannedOut', 'result', '{"children":' .. n .. '}', 'finishedAt', now, 'token', '', 'children', n)
record(KEYS[3], KEYS[4], {'type', 'completed', 'id', id, 'queue', queue, 'at', now, 'token', token, 'result', '{"children":' .. n .. '}', 'next', nextQueue})
local base = pipelineBase(jobPrefix)
redis.call('HSET', base .. 'fanin:' .. id, 'total', n, 'done', 0, 'join', joinQueue, 'priority', priority, 'attempts', attempts, 'createdAt', now, 'trace', joinTrace)
for i = 1, n do
  local childId = id .. ':' .. i
  local childTrace = call.traced and ARGV[1 + n + i] or ownTrace
  local ck = jobKey(jobPrefix, childId)
  redis.call('HSET', ck, 'queue', nextQueue, 'data', ARGV[1 + i], 'attempts', attempts, 'createdAt', now,
    'state', 'ready', 'parent', id, 'trace', childTrace)
  local score
  if priority ~= 0 then
    score = (1000 - priority) * 4398046511104 + redis.call('INCR', KEYS[8])
    redis.call('HSET', ck, 'priority', priority, 'score', score)
  end
  if group then
    redis.call('HSET', ck, 'group', group)
    groupPutReady(queuePrefixOfReady(KEYS[5]), group, childId, false, priority ~= 0, score)
  elseif priority ~= 0 then
    redis.call('ZADD', KEYS[5], score, childId)
  else
    -- (priority 0: the tail of the next stage's line, readyLine.lua)
    redis.call('RPUSH', lineKeyOf(KEYS[5]), childId)
  end
  record(KEYS[3], KEYS[4], {'type', 'enqueued', 'id', childId, 'queue', nextQueue, 'at', now, 'from', id, 'attempts', attempts, 'data', ARGV[1 + i]})
end
redis.call('HINCRBY', KEYS[6], 'enqueued', n)
if n > 0 then wake(KEYS[7]) else enqueueJoin(jobPrefix, id, now) end
return n
