-- A running handler reports progress: stored on the job and appended to its queue's events.
-- KEYS: 1 outbox, 2 meta
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, id, token, now (ms),
--       fraction (0..1, as the text to store); optional message. A record that is not a JSON
--       object or lacks a field: ERR_INVALID_RECORD naming it.
-- Returns 1, or 0 when the lease was lost.
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/lease"
--- @include "includes/record"

local call, bad = wireRecord('report_progress call', ARGV[1])
bad = bad or wireRequire('report_progress call', call,
  {'jobPrefix', 'string', 'queue', 'string', 'id', 'string', 'token', 'string', 'now', 'number', 'fraction', 'string'})
if bad then return redis.error_reply(bad) end
local jobPrefix, queue, id, token = call.jobPrefix, call.queue, call.id, call.token
local at, fraction, message = tostring(call.now), call.fraction, call.message or ''
local jk = jobKey(jobPrefix, id)
if not holdsLease(jk, token) then return 0 end
redis.call('HSET', jk, 'progress', fraction, 'progressMessage', message, 'progressAt', at)
record(KEYS[1], KEYS[2], {'type', 'progress', 'id', id, 'queue', queue, 'at', at, 'token', token, 'progress', fraction, 'message', message})
return 1
