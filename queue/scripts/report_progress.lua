-- A running handler reports progress: stored on the job and appended to its queue's events.
-- KEYS: 1 outbox, 2 meta
-- ARGV: 1 jobPrefix, 2 queue, 3 id, 4 token, 5 now (ms), 6 fraction (0..1), 7 message
-- Returns 1, or 0 when the lease was lost.
--- @include "includes/keys"
--- @include "includes/lease"
--- @include "includes/record"

local jobPrefix, queue, id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local jk = jobKey(jobPrefix, id)
if not holdsLease(jk, token) then return 0 end
redis.call('HSET', jk, 'progress', ARGV[6], 'progressMessage', ARGV[7], 'progressAt', ARGV[5])
record(KEYS[1], KEYS[2], {'type', 'progress', 'id', id, 'queue', queue, 'at', ARGV[5], 'token', token, 'progress', ARGV[6], 'message', ARGV[7]})
return 1
