-- Complete stage N and enqueue the same job (same id) into stage N+1 in one step, so a
-- crash between the two cannot lose or duplicate the hand-over. Both queues share the
-- pipeline's hash tag, so this holds on Redis Cluster too. (The worker settles through
-- settle_jobs.lua, which does the same for a batch; this one-job form stays for other clients.)
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta, 5 nextReady, 6 nextCounts, 7 nextWake
-- ARGV: 1 jobPrefix, 2 queue, 3 id, 4 token, 5 now (ms), 6 result (JSON), 7 nextQueue,
--       8 nextData (JSON), 9 contentHash ('' = none), 10 resultTtlSeconds, 11 reused ('1'/'0'),
--       12 nextContentHash (the next stage's input hash; '' = no reuse there),
--       13 nextTrace (the W3C trace context of the hand-over; '' = keep the job's own)
-- Returns 1, or 0 when the lease was lost, or -1 when the job was cancelled meanwhile.
-- Complete-and-claim (optional): ARGV 14 count, 15 leaseMs, 16 workerId, 17 the newest layout
-- the worker reads (optional): also claims up to `count` jobs of this (the worker's own) queue
-- and returns {1|0, jobs, nextDueMs, startSlackMs, refusedLayout} (see
-- includes/settleAndClaim.lua). Every key is in the pipeline's slot, so this stays
-- Cluster-safe.
--- @include "includes/settleJobs"
--- @include "includes/settleAndClaim"

local jobPrefix, queue = ARGV[1], ARGV[2]
local now = tonumber(ARGV[5])
local tally = newSettleTally(now)
local settled = advanceJob(tally, KEYS[3], KEYS[4], KEYS[5], jobPrefix, queue, now, ARGV[3], ARGV[4], ARGV[6], ARGV[9], ARGV[10], ARGV[11], ARGV[7], ARGV[8], ARGV[12], ARGV[13])
flushSettled(tally, KEYS[1], KEYS[2], KEYS[6], KEYS[7])
return settleAndClaim(ARGV, settled, 13, jobPrefix, queue, now)
