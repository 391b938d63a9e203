-- A running handler writes a line to its job's log (ctx.log, or the handler callback's /log).
-- Only while the caller holds the lease; the list is capped and expires, so a chatty handler
-- costs Redis a bounded amount. Never called for a job whose handler does not log.
-- KEYS: 1 logs (`<P>logs:<id>`, the job's pipeline slot)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, id, token, now (ms), maxLines,
--       ttlSeconds; 2 the line (JSON text). A record that is not a JSON object or lacks a field:
--       ERR_INVALID_RECORD naming it.
-- Returns 1, or 0 when the lease was lost (the line is dropped).
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/lease"

local call, bad = wireRecord('append_log call', ARGV[1])
bad = bad or wireRequire('append_log call', call,
  {'jobPrefix', 'string', 'id', 'string', 'token', 'string', 'maxLines', 'number', 'ttlSeconds', 'number'})
if not bad and ARGV[2] == nil then bad = 'ERR_INVALID_RECORD append_log: the line (ARGV 2) is missing' end
if bad then return redis.error_reply(bad) end
if not holdsLease(jobKey(call.jobPrefix, call.id), call.token) then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('LTRIM', KEYS[1], -call.maxLines, -1)
redis.call('EXPIRE', KEYS[1], call.ttlSeconds)
return 1
