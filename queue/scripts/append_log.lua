-- A running handler writes a line to its job's log (ctx.log, or the handler callback's /log).
-- Only while the caller holds the lease; the list is capped and expires, so a chatty handler
-- costs Redis a bounded amount. Never called for a job whose handler does not log.
-- KEYS: 1 logs (`<P>logs:<id>`, the job's pipeline slot)
-- ARGV: 1 jobPrefix, 2 id, 3 token, 4 now (ms), 5 line (JSON text), 6 maxLines, 7 ttlSeconds
-- Returns 1, or 0 when the lease was lost (the line is dropped).
--- @include "includes/keys"
--- @include "includes/lease"

local jobPrefix, id, token = ARGV[1], ARGV[2], ARGV[3]
if not holdsLease(jobKey(jobPrefix, id), token) then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[5])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[6]), -1)
redis.call('EXPIRE', KEYS[1], ARGV[7])
return 1
