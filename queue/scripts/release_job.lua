-- Hand a running job back for immediate redelivery without counting an attempt; the job goes
-- back to the head of the line (a prioritised one to its score's place). Used at the warm-shutdown
-- drain deadline (counted as `handedBack`), when a handler's dependency is down (counted as
-- `deferred`: the circuit breaker) and when a provider rate-limited the job's resource key
-- (counted as `rateLimited`; the key is sidelined for every worker: docs/protocol.md, "Resources").
-- ARGV: 1 jobPrefix, 2 queue, 3 id, 4 token, 5 now (ms), 6 reason, 7 counter ('handedBack' |
--       'deferred' | 'rateLimited'), and with `rateLimited`: 8 resource, 9 key id, 10 benched until (ms)
--       ('' otherwise), 11 the worker's template version ('' or absent = none: includes/versions.lua)
-- KEYS: 1 inflight, 2 ready, 3 counts, 4 wake, 5 outbox, 6 meta
-- Returns 1, or 0 when the lease was lost (-1 when the job was cancelled).
-- A `handedBack` job's `errors` gains the attempt, kind `handed-back` (attemptErrors.lua): its next
-- attempt is told; a deferral or a rate limit is the dependency's doing, not the attempt's.
--- @include "includes/keys"
--- @include "includes/lease"
--- @include "includes/record"
--- @include "includes/readyLine"
--- @include "includes/wake"
--- @include "includes/groups"
--- @include "includes/resources"
--- @include "includes/attemptErrors"
--- @include "includes/versions"

local jobPrefix, queue, id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = tonumber(ARGV[5])
local jk = jobKey(jobPrefix, id)
local problem = leaseProblem(jk, token)
if problem == 'cancelled' then return -1 end
if problem then return 0 end
if ARGV[7] == 'rateLimited' and ARGV[8] and ARGV[8] ~= '' then
  resourceCorrect(resourceKeyOf(jobPrefix, ARGV[8]), ARGV[9], now, now, {'+bench', ARGV[10]}, 1)
end
redis.call('ZREM', KEYS[1], id)
local f = redis.call('HMGET', jk, 'priority', 'score', 'group', 'attemptsMade')
if f[3] and f[3] ~= '' then groupLeftRunning(groupQueuePrefix(jobPrefix, queue), f[3]) end
if ARGV[7] == 'handedBack' then
  redis.call('HINCRBY', jk, 'handbacks', 1)
  pushAttemptError(jk, attemptErrorJson((tonumber(f[4]) or 0) + 1, 'handed-back', ARGV[6], now))
end
redis.call('HSET', jk, 'state', 'ready', 'token', '', 'requeued', ARGV[7] .. ': ' .. ARGV[6])
putReady(KEYS[2], jk, id, true, f[1], f[2], f[3])
redis.call('HINCRBY', KEYS[3], ARGV[7], 1)
countForVersion(KEYS[3], ARGV[11], 'o')
-- (a rate-limited hand-back is a `deferred` transition in the events and records, its reason
-- saying why: readers of the stream know that type)
record(KEYS[5], KEYS[6], {'type', ARGV[7] == 'rateLimited' and 'deferred' or ARGV[7], 'id', id, 'queue', queue, 'at', now, 'token', token, 'reason', ARGV[6]})
wake(KEYS[4])
return 1
