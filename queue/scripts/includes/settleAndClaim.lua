--- @include "keys"
--- @include "wire"
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

-- A named reply's claim part: `reply` (name/value pairs so far) gains jobs, nextDueMs,
-- startSlackMs and, only when the claim was refused, refusedLayout.
local function namedClaimReply(reply, claimed)
  local n = #reply
  reply[n + 1], reply[n + 2] = 'jobs', claimed[1]
  reply[n + 3], reply[n + 4] = 'nextDueMs', claimed[2]
  reply[n + 5], reply[n + 6] = 'startSlackMs', claimed[3] or 0
  if claimed[4] then reply[n + 7], reply[n + 8] = 'refusedLayout', claimed[4] end
  return reply
end

-- A settling call's claim fields: optional `claim` (jobs to claim, 0 = none) and, when it is
-- over 0, `leaseMs` and `workerId` (optional `readsLayout`). Nil, or the error reply's text.
local function settleAndClaimProblem(what, call)
  if call.claim == nil then return nil end
  local bad = wireRequire(what, call, {'claim', 'number'})
  if bad or call.claim <= 0 then return bad end
  return wireRequire(what, call, {'leaseMs', 'number', 'workerId', 'string'})
end
-- The one-job scripts' form: without `claim` the script returns `settled` alone; with it
-- name/value pairs settled, then the claim's (namedClaimReply).
local function settleAndClaim(call, settled, jobPrefix, queue, now)
  if call.claim == nil then return settled end
  local claimed = claimForSlots(jobPrefix, queue, now, call.claim, call.leaseMs, call.workerId, call.readsLayout)
  return namedClaimReply({'settled', settled}, claimed)
end
