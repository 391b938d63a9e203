-- Settle a batch of finished jobs of one queue in one call — each completed here, or (with a
-- next queue) handed to the next stage — and claim for the slots they free (batched
-- complete-and-claim: the worker sends the completions that finish in the same tick together).
-- Each job is fenced on its own: a lost lease or a cancellation discards only that job's result.
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta; with a next queue also 5 nextReady,
--       6 nextCounts, 7 nextWake, 8 nextContract (`<N>contract`)
-- ARGV: 1 jobPrefix, 2 queue, 3 now (ms), 4 retentionSeconds, 5 nextQueue ('' = complete here),
--       6 count (jobs to claim, 0 = none), 7 leaseMs, 8 workerId,
--       9 the hash of the next stage's contract the caller checked the next data against ('' =
--       none; ignored without a next queue): when it is not the hash in force (`<N>contract`
--       field hash, '' when none): ERR_CONTRACT_CHANGED <hash in force>, nothing written (the
--       caller re-reads that contract, checks again and retries),
--       10 the worker's template version ('' = none; counted per version: includes/versions.lua),
--       11 the newest layout the worker reads ('' = unchecked: includes/claimJobs.lua),
--       then per job 6 fields: id, token, result (JSON), contentHash ('' = none),
--       resultTtlSeconds, reused ('1'/'0'); with a next queue 3 more: nextData (JSON),
--       nextContentHash, nextTrace ('' = keep the job's own)
-- Returns {codes, jobs, nextDueMs, startSlackMs, refusedLayout}: codes has one entry per job in order — 1
-- settled, 0 the lease was lost (fenced), -1 cancelled meanwhile; the rest as claim_jobs returns it.
--- @include "includes/settleJobs"
--- @include "includes/settleAndClaim"

local jobPrefix, queue, nextQueue = ARGV[1], ARGV[2], ARGV[5]
local now, retention = tonumber(ARGV[3]), tonumber(ARGV[4])
if nextQueue ~= '' then
  local inForce = redis.call('HGET', KEYS[8], 'hash') or ''
  if inForce ~= ARGV[9] then return redis.error_reply('ERR_CONTRACT_CHANGED ' .. inForce) end
end
local tally = newSettleTally(now, retention, ARGV[10])
local codes = {}
if nextQueue == '' then
  for i = 12, #ARGV, 6 do
    codes[#codes + 1] = completeJob(tally, KEYS[3], KEYS[4], jobPrefix, queue, now, retention,
      ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5])
  end
else
  for i = 12, #ARGV, 9 do
    codes[#codes + 1] = advanceJob(tally, KEYS[3], KEYS[4], KEYS[5], jobPrefix, queue, now,
      ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], nextQueue,
      ARGV[i + 6], ARGV[i + 7], ARGV[i + 8])
  end
end
flushSettled(tally, KEYS[1], KEYS[2], KEYS[6], KEYS[7])
local claimed = claimForSlots(jobPrefix, queue, now, tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[11]))
return {codes, claimed[1], claimed[2], claimed[3], claimed[4]}
