--- @include "keys"
--- @include "claimJobs"

-- Complete-and-claim (like BullMQ's moveToFinished fetching the next job): a script that
-- settles a job may also claim for the slot it frees, saving the consumer a round trip. The
-- caller appends `count leaseMs workerId` after the script's own `nArgs` arguments; the claim
-- is from `queue` (the consumer's own), whose keys are named here from `jobPrefix` — the
-- pipeline's hash tag, so the same slot as the declared KEYS — rather than sent with every job.
-- Without them the script returns `settled` as before; with them {settled, jobs, nextDueMs}.
-- The claim runs whether or not the settle was fenced: the slot is free either way.
local function settleAndClaim(argv, settled, nArgs, jobPrefix, queue, now)
  local count = tonumber(argv[nArgs + 1] or '')
  if count == nil then return settled end
  if count <= 0 then return {settled, {}, -1} end
  local base = pipelineBase(jobPrefix)
  local q = queueKeyPrefix(base, queue)
  -- claim_jobs' KEYS, in its order
  local keys = {q .. 'ready', q .. 'delayed', q .. 'inflight', q .. 'dead', q .. 'counts', base .. 'fence', q .. 'wake', base .. 'outbox', base .. 'meta'}
  local claimed = claimJobs(keys, jobPrefix, queue, now, tonumber(argv[nArgs + 2]), count, argv[nArgs + 3])
  return {settled, claimed[1], claimed[2]}
end
