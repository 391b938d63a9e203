-- Record a failed attempt: retry after the caller's backoff delay, or dead-letter the job
-- with its reason and attempt history once attempts are spent (or the error is final).
-- KEYS: 1 inflight, 2 delayed, 3 dead, 4 counts, 5 outbox, 6 meta
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, id, token, now (ms),
--       error (the error's JSON object, as text); optional retryDelayMs (0), retryable (true:
--       retry while attempts are left; absent: dead-letter now), kind of the attempt's end
--       (exception | invalid-result | timeout; absent = exception), details (JSON array, as
--       text), rejected (the rejected result of an invalid-result, JSON text), templateVersion
--       (the worker's: includes/versions.lua). A record that is not a JSON object or lacks a
--       field: ERR_INVALID_RECORD naming it, nothing written.
-- The attempt goes into the job's `errors` (attemptErrors.lua); a rejected result is kept as
-- `rejected` (the last one).
-- Returns 'retry', 'dead', or 'lost' when the lease was lost ('cancelled' when the job was cancelled).
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/lease"
--- @include "includes/record"
--- @include "includes/fanIn"
--- @include "includes/groups"
--- @include "includes/attemptErrors"
--- @include "includes/flow"
--- @include "includes/notify"
--- @include "includes/versions"

local call, bad = wireRecord('fail_job call', ARGV[1])
bad = bad or wireRequire('fail_job call', call,
  {'jobPrefix', 'string', 'queue', 'string', 'id', 'string', 'token', 'string', 'now', 'number', 'error', 'string'})
if bad then return redis.error_reply(bad) end
local jobPrefix, queue, id, token, now = call.jobPrefix, call.queue, call.id, call.token, call.now
local version = call.templateVersion or ''
local jk = jobKey(jobPrefix, id)
local problem = leaseProblem(jk, token)
if problem == 'cancelled' then return 'cancelled' end
if problem then
  redis.call('HINCRBY', KEYS[4], 'fenced', 1)
  return 'lost'
end
local made = redis.call('HINCRBY', jk, 'attemptsMade', 1)
local af = redis.call('HMGET', jk, 'attempts', 'group', 'startedAt', 'flow', 'flowKey', 'dependents', 'notify', 'createdAt')
local attempts = tonumber(af[1]) or 1
local errorJson = call.error
local ok, err = pcall(cjson.decode, errorJson)
if not ok or type(err) ~= 'table' then err = {message = errorJson} end
pushAttemptError(jk, attemptErrorJson(made, call.kind or '', err.message or errorJson, now, call.details or ''))
if call.rejected and call.rejected ~= '' then redis.call('HSET', jk, 'rejected', call.rejected) end
redis.call('ZREM', KEYS[1], id)
local retry = call.retryable == true and made < attempts
local g = groupOf(af[2])
local q = g and groupQueuePrefix(jobPrefix, queue)
-- A retry of a sequenced group keeps the group's slot through its backoff (groups.lua, groupSequence).
local holds = retry and g and groupSequence(q, g)
if g and not holds then groupLeftRunning(q, g) end
redis.call('HSET', jk, 'error', errorJson, 'token', '')
redis.call('HINCRBY', KEYS[4], 'failed', 1)
countForVersion(KEYS[4], version, 'f')
local ranMs = attemptRunMs(af[3], now)
if ranMs then redis.call('HINCRBY', KEYS[4], 'runMs', ranMs) end
if retry then
  local due = now + (tonumber(call.retryDelayMs) or 0)
  redis.call('HSET', jk, 'state', 'delayed', 'requeued', 'failed: ' .. string.sub(tostring(err.message or 'error'), 1, 200))
  if holds then redis.call('HSET', jk, 'holdsGroup', '1') end
  redis.call('ZADD', KEYS[2], due, id)
  redis.call('HINCRBY', KEYS[4], 'retried', 1)
  record(KEYS[5], KEYS[6], {'type', 'retried', 'id', id, 'queue', queue, 'at', now, 'token', token, 'attempt', made, 'error', errorJson, 'due', due})
  return 'retry'
end
local reason = err.message or 'failed'
if call.retryable ~= true then reason = 'not retryable: ' .. tostring(reason)
else reason = 'attempts exhausted (' .. made .. '/' .. attempts .. '): ' .. tostring(reason) end
redis.call('HSET', jk, 'state', 'dead', 'deadReason', reason, 'finishedAt', now)
redis.call('ZADD', KEYS[3], now, id)
redis.call('HINCRBY', KEYS[4], 'dead', 1)
countForVersion(KEYS[4], version, 'd')
if g then groupJobDied(q, g, id) end
finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"error":' .. cjson.encode(reason) .. '}', now)
if af[4] then flowJobEnded(jobPrefix, now, af[4], af[5], id, af[6], '{"id":' .. cjson.encode(id) .. ',"error":' .. cjson.encode(reason) .. '}', 'dead') end
record(KEYS[5], KEYS[6], {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'token', token, 'attempt', made, 'error', errorJson, 'reason', reason})
notifyEnded(KEYS[5], KEYS[6], queue, id, 'dead', tostring(now), af[7], af[8], tostring(made), 'error', errorJson)
return 'dead'
