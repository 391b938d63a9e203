-- Hand a running job back for immediate redelivery without counting an attempt; the job goes
-- back to the head of the line (a prioritised one to its score's place). Used at the warm-shutdown
-- drain deadline (counted as `handedBack`), when a handler's dependency is down (counted as
-- `deferred`: the circuit breaker) and when a provider rate-limited the job's resource key
-- (counted as `rateLimited`; the key is sidelined for every worker: docs/protocol.md, "Resources").
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, id, token, now (ms),
--       reason, cause (the counter: 'handedBack' | 'deferred' | 'rateLimited'); with
--       `rateLimited`, optional resource, key (its key id) and benchUntilMs (the key admits nothing
--       until then; all three or none); optional templateVersion (the worker's:
--       includes/versions.lua). A record that is not a JSON object or lacks a field:
--       ERR_INVALID_RECORD naming it, nothing written.
-- KEYS: 1 inflight, 2 ready, 3 counts, 4 wake, 5 outbox, 6 meta
-- Returns 1, or 0 when the lease was lost (-1 when the job was cancelled).
-- A `handedBack` job's `errors` gains the attempt, kind `handed-back` (attemptErrors.lua): its next
-- attempt is told; a deferral or a rate limit is the dependency's doing, not the attempt's.
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/lease"
--- @include "includes/record"
--- @include "includes/readyLine"
--- @include "includes/wake"
--- @include "includes/groups"
--- @include "includes/resources"
--- @include "includes/attemptErrors"
--- @include "includes/versions"

local call, bad = wireRecord('release_job call', ARGV[1])
bad = bad or wireRequire('release_job call', call,
  {'jobPrefix', 'string', 'queue', 'string', 'id', 'string', 'token', 'string', 'now', 'number', 'reason', 'string', 'cause', 'string'})
if not bad and call.resource then
  bad = wireRequire('release_job call', call, {'resource', 'string', 'key', 'string', 'benchUntilMs', 'number'})
end
if bad then return redis.error_reply(bad) end
local jobPrefix, queue, id, token, now = call.jobPrefix, call.queue, call.id, call.token, call.now
local reason, cause = call.reason, call.cause
local jk = jobKey(jobPrefix, id)
local problem = leaseProblem(jk, token)
if problem == 'cancelled' then return -1 end
if problem then return 0 end
if cause == 'rateLimited' and call.resource then
  resourceCorrect(resourceKeyOf(jobPrefix, call.resource), call.key, now, now, {'+bench', call.benchUntilMs}, 1)
end
redis.call('ZREM', KEYS[1], id)
local f = redis.call('HMGET', jk, 'priority', 'score', 'group', 'attemptsMade')
if f[3] and f[3] ~= '' then groupLeftRunning(groupQueuePrefix(jobPrefix, queue), f[3]) end
if cause == 'handedBack' then
  redis.call('HINCRBY', jk, 'handbacks', 1)
  pushAttemptError(jk, attemptErrorJson((tonumber(f[4]) or 0) + 1, 'handed-back', reason, now))
end
redis.call('HSET', jk, 'state', 'ready', 'token', '', 'requeued', cause .. ': ' .. reason)
putReady(KEYS[2], jk, id, true, f[1], f[2], f[3])
redis.call('HINCRBY', KEYS[3], cause, 1)
countForVersion(KEYS[3], call.templateVersion, 'o')
-- (a rate-limited hand-back is a `deferred` transition in the events and records, its reason
-- saying why: readers of the stream know that type)
record(KEYS[5], KEYS[6], {'type', cause == 'rateLimited' and 'deferred' or cause, 'id', id, 'queue', queue, 'at', now, 'token', token, 'reason', reason})
wake(KEYS[4])
return 1
