--- @include "keys"
--- @include "lease"
--- @include "record"
--- @include "rememberResult"
--- @include "readyLine"
--- @include "groups"
--- @include "wake"
--- @include "fanIn"
--- @include "variadic"
--- @include "finished"
--- @include "flow"
--- @include "notify"
--- @include "versions"

-- Settling finished jobs (complete_job, advance_job, settle_jobs): the per-job part — the
-- fencing check, the record, fan-in, the transition's event — runs for each job; what only
-- counts or indexes (the in-flight removal, the counters, the next stage's wake) is collected
-- in a tally and written once per script call by flushSettled: one ZREM and one HINCRBY per
-- counter for a batch instead of per job. flushSettled runs before any claim in the same call,
-- so a job handed to its own queue can be claimed again without losing its new lease.
-- `at`/`ttl`: the call's time and the records' TTL (retention plus the reclaim margin) as text,
-- formatted once per call rather than for every job's HSET, EXPIRE and event (Lua formats a number
-- with sprintf each time it is an argument). `finished`: the ids kept for retention, indexed for
-- reclaiming with one ZADD per call (finished.lua).
-- The completed jobs' events go out as one entry per call (`ev`, written by flushSettled).
-- `runMs`: the completed jobs' run time (claim → settle), the `<Q>counts` field the operator
-- divides by the attempts ended for the mean time a job holds a slot (docs/protocol.md#counters).
-- `version`: the settling worker's template version ('' or nil = none): the completions are also
-- counted per version and run time bucket (versions.lua), one HINCRBY per bucket a call fills.
local function newSettleTally(now, retention, version)
  retention = retention or 0
  return {done = {}, finished = {}, completed = 0, runMs = 0, fenced = 0, reused = 0, enqueued = 0, at = tostring(now), now = now,
    retention = retention, ttl = tostring(finishedTtl(retention)),
    version = version ~= '' and version or nil, buckets = {}}
end
local function tallyRunTime(tally, startedAt)
  local ms = attemptRunMs(startedAt, tally.now) or 0
  tally.runMs = tally.runMs + ms
  if tally.version then
    local b = versionBucket(ms)
    tally.buckets[b] = (tally.buckets[b] or 0) + 1
  end
end
local function tallyCompleted(tally, outboxKey, queue, id, token, result, reused, nextQueue)
  local ev = tally.ev
  if not ev then
    tally.ev = {ids = {id}, tokens = {token}, results = {result}, reused = {reused},
      key = eventsKeyOf(outboxKey, queue), queue = queue, next = nextQueue}
    return
  end
  local k = #ev.ids + 1
  ev.ids[k], ev.tokens[k], ev.results[k], ev.reused[k] = id, token, result, reused
end
local function flushCompletedEvents(tally)
  local ev = tally.ev
  if not ev then return end
  tally.ev = nil
  appendBatchEvent(ev.key, 'completed', {'queue', ev.queue, 'at', tally.at},
    {'id', ev.ids, 'token', ev.tokens, 'result', ev.results, 'reused', ev.reused}, ev.next and {'next', ev.next} or {})
end
-- A settled job of group g left running: counted here, and each group's counter, ring place and
-- wake-up written once per call by flushSettled (groupLeftRunning with the group's count).
local function tallyLeftRunning(tally, jobPrefix, queue, g)
  local left = tally.groupsLeft
  if not left then
    left = {q = groupQueuePrefix(jobPrefix, queue), order = {}, n = {}}
    tally.groupsLeft = left
  end
  if not left.n[g] then
    left.order[#left.order + 1] = g
    left.n[g] = 0
  end
  left.n[g] = left.n[g] + 1
end
local function flushSettled(tally, inflightKey, countsKey, nextCountsKey, nextWakeKey)
  flushCompletedEvents(tally)
  flushNotifyCompleted(tally)
  local left = tally.groupsLeft
  if left then
    tally.groupsLeft = nil
    for _, g in ipairs(left.order) do groupLeftRunning(left.q, g, left.n[g]) end
  end
  if #tally.done > 0 then callVariadic('ZREM', inflightKey, tally.done) end
  indexFinished(finishedKeyOf(inflightKey), tally.now, tally.retention, tally.finished)
  -- (runMs even when 0: a call's commands do not depend on the clock)
  if tally.completed > 0 then
    redis.call('HINCRBY', countsKey, 'completed', tally.completed)
    redis.call('HINCRBY', countsKey, 'runMs', tally.runMs)
  end
  if tally.version then
    local vk, prefix = versionsKeyOf(countsKey), tally.version .. ':h'
    for b, n in pairs(tally.buckets) do redis.call('HINCRBY', vk, prefix .. b, n) end
    tally.buckets = {}
  end
  if tally.fenced > 0 then redis.call('HINCRBY', countsKey, 'fenced', tally.fenced) end
  if tally.reused > 0 then redis.call('HINCRBY', countsKey, 'reused', tally.reused) end
  if tally.enqueued > 0 then
    redis.call('HINCRBY', nextCountsKey, 'enqueued', tally.enqueued)
    wake(nextWakeKey)
  end
end

-- `attemptsMade` of a job whose attempt just succeeded: the failed ones and this one.
local function attemptsAfterSuccess(made)
  if not made or made == '0' then return '1' end
  return tostring((tonumber(made) or 0) + 1)
end

-- Complete one job the caller holds the lease for; keep its record for `retention` seconds
-- (0: delete it), then have it reclaimed (finished.lua). Returns 1, 0 when the lease was lost (the result is discarded: fencing), or
-- -1 when the job was cancelled meanwhile (the result is refused; not counted as fenced).
local function completeJob(tally, outboxKey, metaKey, jobPrefix, queue, now, retention, id, token, result, contentHash, resultTtl, reused)
  local jk = jobKey(jobPrefix, id)
  local held = redis.call('HMGET', jk, 'token', 'parent', 'state', 'trace', 'group', 'startedAt', 'attemptsMade', 'error', 'flow', 'flowKey', 'dependents', 'notify', 'createdAt')
  if not leaseHeld(held[1], token) then
    if held[3] == 'cancelled' then return -1 end
    tally.fenced = tally.fenced + 1
    return 0
  end
  tally.done[#tally.done + 1] = id
  tallyRunTime(tally, held[6])
  if held[5] and held[5] ~= '' then tallyLeftRunning(tally, jobPrefix, queue, held[5]) end
  if retention > 0 then
    -- The succeeding attempt counts among those made, and the outcome is no longer an error (the
    -- failed attempts' errors stay in `errors`); only a job that failed before has one to drop.
    redis.call('HSET', jk, 'state', 'completed', 'result', result, 'finishedAt', tally.at, 'token', '',
      'attemptsMade', attemptsAfterSuccess(held[7]))
    if held[8] then redis.call('HDEL', jk, 'error') end
    redis.call('EXPIRE', jk, tally.ttl)
    tally.finished[#tally.finished + 1] = id
  else
    redis.call('DEL', jk)
  end
  -- (only a fan-out child has a parent: the outcome text is built for those alone)
  if held[2] and held[2] ~= '' then
    finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"result":' .. result .. '}', now, held[2], held[4])
  end
  -- (a flow job ends where it completes: its dependents' counts drop, flow.lua)
  if held[9] then
    flowJobEnded(jobPrefix, now, held[9], held[10], id, held[11], '{"id":' .. cjson.encode(id) .. ',"result":' .. result .. '}', false)
  end
  tally.completed = tally.completed + 1
  if reused == '1' then tally.reused = tally.reused + 1 else rememberResult(jobPrefix, queue, contentHash, resultTtl, result) end
  if outboxOn(metaKey, queue) then
    recordOutbox(outboxKey, metaKey, {'type', 'completed', 'id', id, 'queue', queue, 'at', tally.at, 'token', token, 'result', result, 'reused', reused})
  end
  tallyNotifyCompleted(tally, outboxKey, metaKey, queue, id, held[12], held[13], attemptsAfterSuccess(held[7]), result)
  tallyCompleted(tally, outboxKey, queue, id, token, result, reused)
  return 1
end

-- Complete stage `queue` and enqueue the same job (same id) into `nextQueue` in one step, so a
-- crash between the two cannot lose or duplicate the hand-over. A new stage starts with fresh
-- attempt, stall and timeout budgets (timeout 0 = stage default); `nextTrace` '' keeps the
-- job's own trace context. Returns 1, 0 (fenced) or -1 (cancelled), as completeJob.
local function advanceJob(tally, outboxKey, metaKey, nextReadyKey, jobPrefix, queue, now, id, token, result, contentHash, resultTtl, reused, nextQueue, nextData, nextContentHash, nextTrace)
  local jk = jobKey(jobPrefix, id)
  -- (leaseProblem's one HMGET, with the group)
  local held = redis.call('HMGET', jk, 'token', 'state', 'group', 'uses', 'startedAt', 'attemptsMade', 'attemptsBefore', 'error', 'stages', 'rejected')
  if not leaseHeld(held[1], token) then
    if held[2] == 'cancelled' then return -1 end
    tally.fenced = tally.fenced + 1
    return 0
  end
  tally.done[#tally.done + 1] = id
  tallyRunTime(tally, held[5])
  -- (the job keeps its group in the next stage: putReady puts it in that queue's group line)
  if held[3] and held[3] ~= '' then tallyLeftRunning(tally, jobPrefix, queue, held[3]) end
  tally.completed = tally.completed + 1
  if reused == '1' then tally.reused = tally.reused + 1 else rememberResult(jobPrefix, queue, contentHash, resultTtl, result) end
  if outboxOn(metaKey, queue) then
    recordOutbox(outboxKey, metaKey, {'type', 'completed', 'id', id, 'queue', queue, 'at', tally.at, 'token', token, 'result', result, 'next', nextQueue, 'reused', reused})
  end
  tallyCompleted(tally, outboxKey, queue, id, token, result, reused, nextQueue)
  -- The counters become the next stage's; what this stage took stays in `stages` (the finished
  -- stages' `queue=attempts`, in order), the only trace of it in Redis.
  local made = (tonumber(held[6]) or 0) + (tonumber(held[7]) or 0) + 1
  local stageEntry = queue .. '=' .. made
  local fields = {'queue', nextQueue, 'data', nextData, 'state', 'ready', 'token', '',
    'attemptsMade', '0', 'stalls', '0', 'handbacks', '0', 'timeout', '0', 'createdAt', tally.at,
    'prevQueue', queue, 'errors', '', 'contentHash', nextContentHash, 'progress', '', 'progressMessage', '', 'requeued', '',
    'stages', held[9] and held[9] ~= '' and (held[9] .. ' ' .. stageEntry) or stageEntry}
  if nextTrace ~= '' then
    fields[#fields + 1] = 'trace'
    fields[#fields + 1] = nextTrace
  end
  redis.call('HSET', jk, unpack(fields))
  -- (one HDEL, only for what this job has: a stage's `uses` and its implicit resource group, the
  -- last failure of a stage that then succeeded and its last rejected result, the attempts before
  -- a dead-letter retry)
  local drop = {}
  if held[4] then
    drop[#drop + 1] = 'uses'
    if isResourceGroup(held[3]) then drop[#drop + 1] = 'group' end
  end
  if held[7] then drop[#drop + 1] = 'attemptsBefore' end
  if held[8] then drop[#drop + 1] = 'error' end
  if held[10] then drop[#drop + 1] = 'rejected' end
  if #drop > 0 then redis.call('HDEL', jk, unpack(drop)) end
  -- (the tail of the next stage's line; a prioritised job keeps its score)
  putReady(nextReadyKey, jk, id, false)
  tally.enqueued = tally.enqueued + 1
  -- (handed to its own queue: the stream keeps `completed` before `enqueued`)
  if nextQueue == queue then flushCompletedEvents(tally) end
  record(outboxKey, metaKey, {'type', 'enqueued', 'id', id, 'queue', nextQueue, 'at', tally.at, 'from', queue, 'data', nextData})
  return 1
end
