-- Complete stage N and enqueue the same job (same id) into stage N+1 in one step, so a
-- crash between the two cannot lose or duplicate the hand-over. Both queues share the
-- pipeline's hash tag, so this holds on Redis Cluster too. (The worker settles through
-- settle_jobs.lua, which does the same for a batch; this one-job form stays for other clients.)
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta, 5 nextReady, 6 nextCounts, 7 nextWake
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, id, token, now (ms),
--       nextQueue; optional contentHash, resultTtlSeconds (0), reused (true when the result came
--       from the cache), nextContentHash (the next stage's input hash; none = no reuse there),
--       nextTrace (the W3C trace context of the hand-over; none = keep the job's own), and for
--       complete-and-claim claim, leaseMs, workerId, readsLayout (includes/settleAndClaim.lua);
--       2 the result (JSON text), 3 the next stage's data (JSON text). A record that is not a
--       JSON object or lacks a field: ERR_INVALID_RECORD naming it.
-- Returns 1, or 0 when the lease was lost, or -1 when the job was cancelled meanwhile. With
-- `claim` (of this, the worker's own, queue): name/value pairs settled, jobs, nextDueMs,
-- startSlackMs[, refusedLayout]. Every key is in the pipeline's slot, so this stays Cluster-safe.
--- @include "includes/wire"
--- @include "includes/settleJobs"
--- @include "includes/settleAndClaim"

local call, bad = wireRecord('advance_job call', ARGV[1])
bad = bad or wireRequire('advance_job call', call,
  {'jobPrefix', 'string', 'queue', 'string', 'id', 'string', 'token', 'string', 'now', 'number', 'nextQueue', 'string'})
bad = bad or settleAndClaimProblem('advance_job call', call)
if not bad and ARGV[3] == nil then bad = 'ERR_INVALID_RECORD advance_job: the result and next data (ARGV 2, 3) are missing' end
if bad then return redis.error_reply(bad) end
local jobPrefix, queue, now = call.jobPrefix, call.queue, call.now
local tally = newSettleTally(now)
local settled = advanceJob(tally, KEYS[3], KEYS[4], KEYS[5], jobPrefix, queue, now, call.id, call.token, ARGV[2],
  call.contentHash or '', call.resultTtlSeconds or 0, call.reused and '1' or '0', call.nextQueue, ARGV[3],
  call.nextContentHash or '', call.nextTrace or '')
flushSettled(tally, KEYS[1], KEYS[2], KEYS[6], KEYS[7])
return settleAndClaim(call, settled, jobPrefix, queue, now)
