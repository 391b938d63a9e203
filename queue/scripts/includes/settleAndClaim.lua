--- @include "keys"
--- @include "claimJobs"

-- Complete-and-claim (like BullMQ's moveToFinished fetching the next job): a script that
-- settles jobs may also claim for the slots it frees, saving the consumer a round trip. The
-- claim is from `queue` (the consumer's own), whose keys are named here from `jobPrefix` — the
-- pipeline's hash tag, so the same slot as the declared KEYS — rather than sent with every call.
-- The claim runs whether or not a settle was fenced: the slot is free either way.
-- Returns claim_jobs' reply, {jobs, nextDueMs, startSlackMs, refusedLayout}.
local function claimForSlots(jobPrefix, queue, now, count, leaseMs, workerId, reads)
  if count <= 0 then return {{}, -1, 0} end
  local base = pipelineBase(jobPrefix)
  return claimJobs(claimKeysFor(base, queueKeyPrefix(base, queue)), jobPrefix, queue, now, leaseMs, count, workerId, reads)
end

-- The one-job scripts' form: the caller appends `count leaseMs workerId [reads]` after the
-- script's own `nArgs` arguments. Without them the script returns `settled` alone; with them
-- {settled, jobs, nextDueMs, startSlackMs, refusedLayout}.
local function settleAndClaim(argv, settled, nArgs, jobPrefix, queue, now)
  local count = tonumber(argv[nArgs + 1] or '')
  if count == nil then return settled end
  local claimed = claimForSlots(jobPrefix, queue, now, count, tonumber(argv[nArgs + 2]), argv[nArgs + 3], tonumber(argv[nArgs + 4] or ''))
  return {settled, claimed[1], claimed[2], claimed[3], claimed[4]}
end
