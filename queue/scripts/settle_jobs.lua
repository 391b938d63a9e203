-- Settle a batch of finished jobs of one queue in one call — each completed here, or (with a
-- next queue) handed to the next stage — and claim for the slots they free (batched
-- complete-and-claim: the worker sends the completions that finish in the same tick together).
-- Each job is fenced on its own: a lost lease or a cancellation discards only that job's result.
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta; with a next queue also 5 nextReady,
--       6 nextCounts, 7 nextWake, 8 nextContract (`<N>contract`)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, now (ms), jobFields
--       (the names of the per-job values this call sends, in their order: id and token, then any
--       of contentHash, resultTtlSeconds (0), reused (1: the result was reused, not remembered
--       again; '' or 0: not), nextContentHash, nextTrace ('' = keep the job's own)); optional
--       retentionSeconds (0), nextQueue (none: complete here), claim (jobs to claim for the
--       freed slots, 0), leaseMs, workerId (both needed with a claim), contract (the hash of the
--       next stage's contract the caller checked the next data against; none when it has none:
--       when it is not the hash in force (`<N>contract` field hash) ERR_CONTRACT_CHANGED <hash in
--       force>, nothing written; the caller re-reads that contract, checks again and retries),
--       templateVersion (the worker's: counted per version, includes/versions.lua), readsLayout
--       (the newest layout the worker reads; none = unchecked, includes/claimJobs.lua);
--       then per job its values in jobFields' order ('' in an optional one: its default), its
--       result (JSON text) and, with a next queue, its next data (JSON text). The names are
--       resolved once per call: a call record that is not a JSON object or lacks a field, an
--       unknown or repeated job field, id or token not among them, a count of values that is not
--       whole jobs, or a job with an empty id or token or a value out of its range:
--       ERR_INVALID_RECORD naming it (and the job), nothing written.
-- Returns name/value pairs: codes (one per job in order — 1 settled, 0 the lease was lost
-- (fenced), -1 cancelled meanwhile), jobs, nextDueMs, startSlackMs, and refusedLayout only when
-- the claim was refused (as claim_jobs returns them).
--- @include "includes/wire"
--- @include "includes/settleJobs"
--- @include "includes/settleAndClaim"

local JOB_FIELDS = {id = true, token = true, contentHash = true, resultTtlSeconds = true, reused = true,
  nextContentHash = true, nextTrace = true}

-- Each job field's offset from a job's first value (nil: not sent) and the values per job with
-- its texts; or nil and the error reply's text.
local function jobColumns(names, texts)
  if type(names) ~= 'table' then return nil, nil, 'ERR_INVALID_RECORD settle_jobs call: field jobFields must be a list of job field names' end
  local at = {}
  for k, name in ipairs(names) do
    if not JOB_FIELDS[name] or at[name] then
      return nil, nil, 'ERR_INVALID_RECORD settle_jobs call: jobFields: unknown or repeated job field ' .. tostring(name)
    end
    at[name] = k - 1
  end
  if not at.id or not at.token then return nil, nil, 'ERR_INVALID_RECORD settle_jobs call: jobFields must name id and token' end
  return at, #names + texts
end

local call, bad = wireRecord('settle_jobs call', ARGV[1])
bad = bad or wireRequire('settle_jobs call', call, {'jobPrefix', 'string', 'queue', 'string', 'now', 'number'})
bad = bad or settleAndClaimProblem('settle_jobs call', call)
if bad then return redis.error_reply(bad) end
local claim = call.claim or 0
local jobPrefix, queue, nextQueue, now = call.jobPrefix, call.queue, call.nextQueue, call.now
local at, width
at, width, bad = jobColumns(call.jobFields, nextQueue and 2 or 1)
if bad then return redis.error_reply(bad) end
if (#ARGV - 1) % width ~= 0 then
  return redis.error_reply('ERR_INVALID_RECORD settle_jobs: ' .. (#ARGV - 1) .. ' values after the call record are not whole jobs of ' ..
    width .. ' (' .. table.concat(call.jobFields, ',') .. ', result' .. (nextQueue and ', next data)' or ')'))
end
local cId, cToken, cHash, cTtl, cReused, cNextHash, cNextTrace = at.id, at.token, at.contentHash, at.resultTtlSeconds,
  at.reused, at.nextContentHash, at.nextTrace
-- (every job checked before anything is written)
for i = 2, #ARGV, width do
  local id, problem = ARGV[i + cId], nil
  if id == '' then problem = 'field id must not be empty'
  elseif ARGV[i + cToken] == '' then problem = 'field token must not be empty'
  elseif cTtl and ARGV[i + cTtl] ~= '' and not tonumber(ARGV[i + cTtl]) then problem = 'field resultTtlSeconds must be a number, got ' .. ARGV[i + cTtl]
  elseif cReused and ARGV[i + cReused] ~= '' and ARGV[i + cReused] ~= '0' and ARGV[i + cReused] ~= '1' then
    problem = 'field reused must be 1, 0 or empty, got ' .. ARGV[i + cReused]
  end
  if problem then
    return redis.error_reply('ERR_INVALID_RECORD settle_jobs job ' .. (id ~= '' and id or ('#' .. ((i - 2) / width + 1))) .. ': ' .. problem)
  end
end
if nextQueue then
  local inForce = redis.call('HGET', KEYS[8], 'hash') or ''
  if inForce ~= (call.contract or '') then return redis.error_reply('ERR_CONTRACT_CHANGED ' .. inForce) end
end
local retention = call.retentionSeconds or 0
local tally = newSettleTally(now, retention, call.templateVersion or '')
local codes = {}
local texts = width - (nextQueue and 2 or 1)
for i = 2, #ARGV, width do
  local contentHash = cHash and ARGV[i + cHash] or ''
  local ttl = cTtl and ARGV[i + cTtl] or ''
  if ttl == '' then ttl = 0 end
  local reused = cReused and ARGV[i + cReused] == '1' and '1' or '0'
  if nextQueue then
    codes[#codes + 1] = advanceJob(tally, KEYS[3], KEYS[4], KEYS[5], jobPrefix, queue, now, ARGV[i + cId], ARGV[i + cToken],
      ARGV[i + texts], contentHash, ttl, reused, nextQueue, ARGV[i + texts + 1], cNextHash and ARGV[i + cNextHash] or '',
      cNextTrace and ARGV[i + cNextTrace] or '')
  else
    codes[#codes + 1] = completeJob(tally, KEYS[3], KEYS[4], jobPrefix, queue, now, retention, ARGV[i + cId], ARGV[i + cToken],
      ARGV[i + texts], contentHash, ttl, reused)
  end
end
flushSettled(tally, KEYS[1], KEYS[2], KEYS[6], KEYS[7])
local claimed = claimForSlots(jobPrefix, queue, now, claim, call.leaseMs, call.workerId, call.readsLayout)
return namedClaimReply({'codes', codes}, claimed)
