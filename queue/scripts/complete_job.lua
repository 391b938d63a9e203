-- Complete a job the caller holds the lease for; keep its record for `retentionSeconds`.
-- (The worker settles through settle_jobs.lua, which does the same for a batch; this one-job
-- form stays for other clients.)
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta
-- ARGV: 1 jobPrefix, 2 queue, 3 id, 4 token, 5 now (ms), 6 result (JSON), 7 retentionSeconds,
--       8 contentHash ('' = none), 9 resultTtlSeconds, 10 reused ('1' when the result came from the cache)
-- Returns 1, or 0 when the lease was lost (the result is discarded: fencing), or -1 when the
-- job was cancelled meanwhile (the result is refused; not counted as fenced).
-- Complete-and-claim (optional): ARGV 11 count, 12 leaseMs, 13 workerId, 14 the newest layout
-- the worker reads (optional): also claims up to `count` jobs of this queue for the freed slot(s)
-- and returns {1|0, jobs, nextDueMs, startSlackMs, refusedLayout} as claim_jobs does (see
-- includes/settleAndClaim.lua).
--- @include "includes/settleJobs"
--- @include "includes/settleAndClaim"

local jobPrefix, queue = ARGV[1], ARGV[2]
local now = tonumber(ARGV[5])
local tally = newSettleTally(now, tonumber(ARGV[7]))
local settled = completeJob(tally, KEYS[3], KEYS[4], jobPrefix, queue, now, tonumber(ARGV[7]), ARGV[3], ARGV[4], ARGV[6], ARGV[8], ARGV[9], ARGV[10])
flushSettled(tally, KEYS[1], KEYS[2])
return settleAndClaim(ARGV, settled, 10, jobPrefix, queue, now)
