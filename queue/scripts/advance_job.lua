-- Complete stage N and enqueue the same job (same id) into stage N+1 in one step, so a
-- crash between the two cannot lose or duplicate the hand-over. Both queues share the
-- pipeline's hash tag, so this holds on Redis Cluster too.
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta, 5 nextReady, 6 nextCounts, 7 nextWake
-- ARGV: 1 jobPrefix, 2 queue, 3 id, 4 token, 5 now (ms), 6 result (JSON), 7 nextQueue,
--       8 nextData (JSON), 9 contentHash ('' = none), 10 resultTtlSeconds, 11 reused ('1'/'0'),
--       12 nextContentHash (the next stage's input hash; '' = no reuse there),
--       13 nextTrace (the W3C trace context of the hand-over; '' = keep the job's own)
-- Returns 1, or 0 when the lease was lost, or -1 when the job was cancelled meanwhile.
-- Complete-and-claim (optional): ARGV 14 count, 15 leaseMs, 16 workerId: also claims up to
-- `count` jobs of this (the worker's own) queue and returns {1|0, jobs, nextDueMs} (see
-- includes/settleAndClaim.lua). Every key is in the pipeline's slot, so this stays
-- Cluster-safe.
--- @include "includes/keys"
--- @include "includes/lease"
--- @include "includes/record"
--- @include "includes/rememberResult"
--- @include "includes/requeueScore"
--- @include "includes/wake"
--- @include "includes/settleAndClaim"

local jobPrefix, queue, id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = tonumber(ARGV[5])
local nextQueue = ARGV[7]
local jk = jobKey(jobPrefix, id)
local problem = leaseProblem(jk, token)
if problem == 'cancelled' then return settleAndClaim(ARGV, -1, 13, jobPrefix, queue, now) end
if problem then
  redis.call('HINCRBY', KEYS[2], 'fenced', 1)
  return settleAndClaim(ARGV, 0, 13, jobPrefix, queue, now)
end
local score = requeueScore(jobPrefix, jk)
redis.call('ZREM', KEYS[1], id)
redis.call('HINCRBY', KEYS[2], 'completed', 1)
if ARGV[11] == '1' then redis.call('HINCRBY', KEYS[2], 'reused', 1) else rememberResult(jobPrefix, queue, ARGV[9], ARGV[10], ARGV[6]) end
record(KEYS[3], KEYS[4], {'type', 'completed', 'id', id, 'queue', queue, 'at', now, 'token', token, 'result', ARGV[6], 'next', nextQueue, 'reused', ARGV[11]})
-- A new stage starts with fresh attempt, stall and timeout budgets (timeout 0 = stage default).
redis.call('HSET', jk, 'queue', nextQueue, 'data', ARGV[8], 'state', 'ready', 'token', '',
  'attemptsMade', 0, 'stalls', 0, 'handbacks', 0, 'timeout', 0, 'createdAt', now,
  'prevQueue', queue, 'errors', '', 'contentHash', ARGV[12], 'progress', '', 'progressMessage', '', 'requeued', '')
if ARGV[13] ~= '' then redis.call('HSET', jk, 'trace', ARGV[13]) end
redis.call('ZADD', KEYS[5], score, id)
redis.call('HINCRBY', KEYS[6], 'enqueued', 1)
record(KEYS[3], KEYS[4], {'type', 'enqueued', 'id', id, 'queue', nextQueue, 'at', now, 'from', queue, 'data', ARGV[8]})
wake(KEYS[7])
return settleAndClaim(ARGV, 1, 13, jobPrefix, queue, now)
