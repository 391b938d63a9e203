-- Claim up to `count` ready jobs for one worker: promote due delayed jobs, pop by priority,
-- and write each lease (deadline + fencing token) in the same step, so a job is never
-- popped without an owner. The claim itself is `claimJobs` in includes/claimJobs.lua, shared with the
-- complete-and-claim option of complete_job.lua and advance_job.lua.
-- KEYS: 1 ready, 2 delayed, 3 inflight, 4 dead, 5 counts, 6 fence, 7 wake, 8 outbox, 9 meta, 10 contract
--   (includes/claimKeys.lua, CLAIM_KEYS)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, now (ms), leaseMs,
--   count, workerId, optional readsLayout (the newest layout the worker reads; absent: unchecked).
--   A record that is not a JSON object or lacks a field: ERR_INVALID_RECORD naming it.
-- Returns name/value pairs jobs, nextDueMs, startSlackMs and, only when the claim was refused,
-- refusedLayout (includes/claimJobs.lua says what each holds); jobs is empty, or the per-job
-- field names ('id,token,data,...') followed by each job's values.
--- @include "includes/wire"
--- @include "includes/settleAndClaim"

local call, bad = wireRecord('claim_jobs call', ARGV[1])
bad = bad or wireRequire('claim_jobs call', call, {'jobPrefix', 'string', 'queue', 'string', 'now', 'number',
  'leaseMs', 'number', 'count', 'number', 'workerId', 'string'})
if bad then return redis.error_reply(bad) end
return namedClaimReply({}, claimJobs(claimKeysOf(KEYS), call.jobPrefix, call.queue, call.now, call.leaseMs, call.count,
  call.workerId, call.readsLayout))
