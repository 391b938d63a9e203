-- Complete a job the caller holds the lease for; keep its record for `retentionSeconds`.
-- (The worker settles through settle_jobs.lua, which does the same for a batch; this one-job
-- form stays for other clients.)
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, id, token, now (ms);
--       optional retentionSeconds (0 = delete the record), contentHash, resultTtlSeconds (0),
--       reused (true when the result came from the cache), and for complete-and-claim claim,
--       leaseMs, workerId, readsLayout (includes/settleAndClaim.lua); 2 the result (JSON text).
--       A record that is not a JSON object or lacks a field: ERR_INVALID_RECORD naming it.
-- Returns 1, or 0 when the lease was lost (the result is discarded: fencing), or -1 when the
-- job was cancelled meanwhile (the result is refused; not counted as fenced). With `claim`:
-- name/value pairs settled, jobs, nextDueMs, startSlackMs[, refusedLayout].
--- @include "includes/wire"
--- @include "includes/settleJobs"
--- @include "includes/settleAndClaim"

local call, bad = wireRecord('complete_job call', ARGV[1])
bad = bad or wireRequire('complete_job call', call, {'jobPrefix', 'string', 'queue', 'string', 'id', 'string', 'token', 'string', 'now', 'number'})
bad = bad or settleAndClaimProblem('complete_job call', call)
if not bad and ARGV[2] == nil then bad = 'ERR_INVALID_RECORD complete_job: the result (ARGV 2) is missing' end
if bad then return redis.error_reply(bad) end
local jobPrefix, queue, now = call.jobPrefix, call.queue, call.now
local retention = call.retentionSeconds or 0
local tally = newSettleTally(now, retention)
local settled = completeJob(tally, KEYS[3], KEYS[4], jobPrefix, queue, now, retention, call.id, call.token, ARGV[2],
  call.contentHash or '', call.resultTtlSeconds or 0, call.reused and '1' or '0')
flushSettled(tally, KEYS[1], KEYS[2])
return settleAndClaim(call, settled, jobPrefix, queue, now)
