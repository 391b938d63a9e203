--- @include "keys"
--- @include "wake"
--- @include "record"
--- @include "promoteDue"
--- @include "control"
--- @include "claimKeys"
--- @include "claimPop"
--- @include "claimGroups"
--- @include "claimAdmission"
--- @include "claimLeases"

-- The claim (claim_jobs.lua, and the complete-and-claim of complete_job, advance_job and
-- settle_jobs): a pipeline of steps, each in its own include, so a job is never popped without
-- an owner —
--   promote due delayed jobs (promoteDue.lua)
--   → pop the queue's own jobs by priority (claimPop.lua)
--   → the groups, round-robin (claimGroups.lua)
--   → admission: pause and rate limit (claimAdmission.lua; resources are read once per claim
--     in claimGroups)
--   → leases and the reply (claimLeases.lua).
-- The steps share the claim `c` newClaim returns.

-- Takes the claim's keys by name (claimKeys.lua), `now` on the caller's clock. Admission (rate
-- windows, ring waits, resources) runs on Redis' clock, read once per claim and only when a
-- limit needs it (c.clock(): control.lua, serverTimeMs); the fencing tokens reuse the reading.
-- A queue where grouped jobs wait, known for free when this call has read `<P>meta` already
-- (complete-and-claim, settle_jobs: record.lua readMeta), serves its own (ungrouped) jobs as one
-- more participant of the round-robin, the ring's member '' (c.mixed); otherwise they go first.
local function newClaim(keys, jobPrefix, queue, now, count, reads)
  local metaSeen = metaFields[keys.meta .. ' ' .. queue]
  local c = {keys = keys, jobPrefix = jobPrefix, queue = queue, now = now, count = count, reads = reads, ok = {}, seen = {},
    taken = 0, startSlack = 0, mixed = metaSeen ~= nil and metaSeen[5] == '1'}
  c.clock = function()
    c.clockMs = c.clockMs or serverTimeMs()
    return c.clockMs
  end
  return c
end

-- Claims up to `count` jobs for `workerId`, each leased for `leaseMs`, by a worker that reads
-- layouts up to `reads` (nil: unchecked). Returns {jobs, nextDueMs, startSlackMs, refusedLayout}:
-- jobs as claimLeases returns them (docs/protocol.md, "The claim reply"); nextDueMs when the next
-- delayed job or rate window is due, on the caller's clock (-1: none); startSlackMs > 0 when a
-- rate window counted these starts: the caller starts each job within that many ms of sending its
-- call, or hands it back unstarted (control.lua, rateSlack); refusedLayout (absent unless so) the
-- layout in force when it is newer than `reads`: nothing was claimed (control.lua, layoutRefused).
local function claimJobs(keys, jobPrefix, queue, now, leaseMs, count, workerId, reads)
  local nextDue = promoteDue(jobPrefix, queue, keys.ready, keys.delayed, keys.dead, keys.counts, now)
  local c = newClaim(keys, jobPrefix, queue, now, count, reads)
  if not c.mixed then popUngrouped(c) end
  if c.taken < count then claimGroups(c) end
  claimGate(c)
  local jobs, started = claimLeases(c, leaseMs, workerId)
  claimRateLog(c, started)

  -- Chain the wake-up: if work may remain (the pop was not cut short), the next blocked
  -- consumer should look too. (A queue emptied by exactly this pop costs one idle look.)
  if c.taken >= count and not c.gated then rewake(keys.wake) end

  if nextDue == nil then
    local first = redis.call('ZRANGE', keys.delayed, '0', '0', 'WITHSCORES')
    nextDue = first[2] and tonumber(first[2]) or -1
  end
  -- Rate-limited: come back when the window has room (or earlier, when a delayed job is due). The
  -- window's time is Redis'; the reply gives it on the caller's clock, which the caller sleeps by.
  local freeAt = c.freeAt
  if c.groupFreeAt and (not freeAt or c.groupFreeAt < freeAt) then freeAt = c.groupFreeAt end
  if freeAt then freeAt = freeAt - c.clockMs + now end
  if freeAt and (nextDue < 0 or freeAt < nextDue) then nextDue = freeAt end
  return {jobs, nextDue, started > 0 and c.startSlack or 0, c.refusedLayout}
end
