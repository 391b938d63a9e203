-- Settle a batch of finished jobs of one queue in one call — each completed here, or (with a
-- next queue) handed to the next stage — and claim for the slots they free (batched
-- complete-and-claim: the worker sends the completions that finish in the same tick together).
-- Each job is fenced on its own: a lost lease or a cancellation discards only that job's result.
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta; with a next queue also 5 nextReady,
--       6 nextCounts, 7 nextWake, 8 nextContract (`<N>contract`)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, now (ms); optional
--       retentionSeconds (0), nextQueue (none: complete here), claim (jobs to claim for the
--       freed slots, 0), leaseMs, workerId (both needed with a claim), contract (the hash of the
--       next stage's contract the caller checked the next data against; none when it has none:
--       when it is not the hash in force (`<N>contract` field hash) ERR_CONTRACT_CHANGED <hash in
--       force>, nothing written; the caller re-reads that contract, checks again and retries),
--       templateVersion (the worker's: counted per version, includes/versions.lua), readsLayout
--       (the newest layout the worker reads; none = unchecked, includes/claimJobs.lua);
--       then per job its record (JSON): id, token; optional contentHash, resultTtlSeconds (0),
--       reused (true: the result was reused, not remembered again), nextContentHash, nextTrace
--       (none = keep the job's own); then the job's result (JSON text) and, with a next queue,
--       its next data (JSON text). A record that is not a JSON object or lacks a field:
--       ERR_INVALID_RECORD naming it, nothing written.
-- Returns name/value pairs: codes (one per job in order — 1 settled, 0 the lease was lost
-- (fenced), -1 cancelled meanwhile), jobs, nextDueMs, startSlackMs, and refusedLayout only when
-- the claim was refused (as claim_jobs returns them).
--- @include "includes/wire"
--- @include "includes/settleJobs"
--- @include "includes/settleAndClaim"

local call, bad = wireRecord('settle_jobs call', ARGV[1])
bad = bad or wireRequire('settle_jobs call', call, {'jobPrefix', 'string', 'queue', 'string', 'now', 'number'})
local claim = call and tonumber(call.claim) or 0
if not bad and claim > 0 then bad = wireRequire('settle_jobs call', call, {'leaseMs', 'number', 'workerId', 'string'}) end
if bad then return redis.error_reply(bad) end
local jobPrefix, queue, nextQueue, now = call.jobPrefix, call.queue, call.nextQueue, call.now
local width = nextQueue and 3 or 2
local jobs = {}
for i = 2, #ARGV, width do
  local j, err = wireRecord('settle_jobs job', ARGV[i])
  err = err or wireRequire('settle_jobs job ' .. tostring(j and j.id), j, {'id', 'string', 'token', 'string'})
  if not err and ARGV[i + width - 1] == nil then err = 'ERR_INVALID_RECORD settle_jobs job ' .. j.id .. ': its texts are missing' end
  if err then return redis.error_reply(err) end
  jobs[#jobs + 1] = j
end
if nextQueue then
  local inForce = redis.call('HGET', KEYS[8], 'hash') or ''
  if inForce ~= (call.contract or '') then return redis.error_reply('ERR_CONTRACT_CHANGED ' .. inForce) end
end
local retention = call.retentionSeconds or 0
local tally = newSettleTally(now, retention, call.templateVersion or '')
local codes = {}
for n, j in ipairs(jobs) do
  local i = 2 + (n - 1) * width
  local reused = j.reused and '1' or '0'
  if nextQueue then
    codes[n] = advanceJob(tally, KEYS[3], KEYS[4], KEYS[5], jobPrefix, queue, now, j.id, j.token, ARGV[i + 1],
      j.contentHash or '', j.resultTtlSeconds or 0, reused, nextQueue, ARGV[i + 2], j.nextContentHash or '', j.nextTrace or '')
  else
    codes[n] = completeJob(tally, KEYS[3], KEYS[4], jobPrefix, queue, now, retention, j.id, j.token, ARGV[i + 1],
      j.contentHash or '', j.resultTtlSeconds or 0, reused)
  end
end
flushSettled(tally, KEYS[1], KEYS[2], KEYS[6], KEYS[7])
local claimed = claimForSlots(jobPrefix, queue, now, claim, call.leaseMs, call.workerId, call.readsLayout)
return namedClaimReply({'codes', codes}, claimed)
