-- Claim up to `count` ready jobs for one worker: promote due delayed jobs, pop by priority,
-- and write each lease (deadline + fencing token) in the same step, so a job is never
-- popped without an owner. The claim itself is `claimJobs` in includes/claimJobs.lua, shared with the
-- complete-and-claim option of complete_job.lua and advance_job.lua.
-- KEYS: 1 ready, 2 delayed, 3 inflight, 4 dead, 5 counts, 6 fence, 7 wake, 8 outbox, 9 meta, 10 contract
--   (includes/claimKeys.lua, CLAIM_KEYS)
-- ARGV: 1 jobPrefix, 2 queue, 3 now (ms), 4 leaseMs, 5 count, 6 workerId, 7 the newest layout
--   the worker reads (optional; absent: unchecked)
-- Returns {jobs, nextDueMs, startSlackMs, refusedLayout} (includes/claimJobs.lua says what each
-- holds); jobs is empty, or the per-job field names ('id,token,data,...') followed by each job's
-- values.
--- @include "includes/claimJobs"

return claimJobs(claimKeysOf(KEYS), ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7] or ''))
