-- Complete a job the caller holds the lease for; keep its record for `retentionSeconds`.
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta
-- ARGV: 1 jobPrefix, 2 queue, 3 id, 4 token, 5 now (ms), 6 result (JSON), 7 retentionSeconds,
--       8 contentHash ('' = none), 9 resultTtlSeconds, 10 reused ('1' when the result came from the cache)
-- Returns 1, or 0 when the lease was lost (the result is discarded: fencing), or -1 when the
-- job was cancelled meanwhile (the result is refused; not counted as fenced).
-- Complete-and-claim (optional): ARGV 11 count, 12 leaseMs, 13 workerId: also claims up to
-- `count` jobs of this queue for the freed slot(s) and returns {1|0, jobs, nextDueMs} as
-- claim_jobs does (see includes/settleAndClaim.lua).
--- @include "includes/keys"
--- @include "includes/lease"
--- @include "includes/record"
--- @include "includes/rememberResult"
--- @include "includes/fanIn"
--- @include "includes/settleAndClaim"

local jobPrefix, queue, id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = tonumber(ARGV[5])
local jk = jobKey(jobPrefix, id)
local held = redis.call('HMGET', jk, 'token', 'parent', 'state', 'trace')
if not leaseHeld(held[1], token) then
  if held[3] == 'cancelled' then return settleAndClaim(ARGV, -1, 10, jobPrefix, queue, now) end
  redis.call('HINCRBY', KEYS[2], 'fenced', 1)
  return settleAndClaim(ARGV, 0, 10, jobPrefix, queue, now)
end
redis.call('ZREM', KEYS[1], id)
local retention = tonumber(ARGV[7])
if retention > 0 then
  redis.call('HSET', jk, 'state', 'completed', 'result', ARGV[6], 'finishedAt', now, 'token', '')
  redis.call('EXPIRE', jk, retention)
else
  redis.call('DEL', jk)
end
finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"result":' .. ARGV[6] .. '}', now, held[2], held[4])
redis.call('HINCRBY', KEYS[2], 'completed', 1)
if ARGV[10] == '1' then redis.call('HINCRBY', KEYS[2], 'reused', 1) else rememberResult(jobPrefix, queue, ARGV[8], ARGV[9], ARGV[6]) end
record(KEYS[3], KEYS[4], {'type', 'completed', 'id', id, 'queue', queue, 'at', now, 'token', token, 'result', ARGV[6], 'reused', ARGV[10]})
return settleAndClaim(ARGV, 1, 10, jobPrefix, queue, now)
