--- @include "keys"
--- @include "wake"
--- @include "record"
--- @include "claimable"
--- @include "malformed"
--- @include "promoteDue"
--- @include "control"
--- @include "variadic"
--- @include "fencingTokens"

-- The claim (claim_jobs.lua, and the complete-and-claim option of complete_job/advance_job):
-- promote due delayed jobs, pop up to `count` ready jobs by priority and write each lease
-- (deadline + fencing token) in the same step, so a job is never popped without an owner.
-- `keys` are claim_jobs' KEYS: 1 ready, 2 delayed, 3 inflight, 4 dead, 5 counts, 6 fence,
-- 7 wake, 8 outbox, 9 meta. Returns {jobs, nextDueMs}; jobs is a flat list of 11 fields per job:
--   id, token, data, attempt, attempts, timeoutMs, stalls, createdAt, contentHash, trace, requeued
-- (trace: the W3C context the job was created in; requeued: why it last went back to ready)
local function claimJobs(keys, jobPrefix, queue, now, leaseMs, count, workerId)
  local nextDue = promoteDue(jobPrefix, queue, keys[1], keys[2], keys[4], keys[5], now)

  local jobs = {}
  local popped = redis.call('ZPOPMIN', keys[1], count)
  -- Pause and rate limit (see control.lua): what may not start goes back with its own score.
  local gated, freeAt, rate, kept = false, nil, nil, nil
  -- Jobs started by this claim (the rate limit's log counts them; the reply's field count may grow).
  local started = 0
  if #popped > 0 then
    local paused, rlog
    paused, rate, rlog = readControl(keys[9], queue)
    local allowed = #popped / 2
    if paused then
      allowed = 0
    elseif rate then
      -- (`now` moves to the window's clock: the starts are recorded at the time the limit counted them)
      allowed, kept, freeAt, now = rateAllowance(rate, rlog, now, allowed)
    end
    if allowed < #popped / 2 then
      gated = true
      local back = {}
      for i = 2 * allowed + 1, #popped, 2 do
        back[#back + 1] = popped[i + 1]
        back[#back + 1] = popped[i]
        popped[i], popped[i + 1] = nil, nil
      end
      callVariadic('ZADD', keys[1], back)
    end
  end
  -- Checked before anything changes: a Lua error here would leave the rest of the batch in no set.
  local ok = {}
  for i = 1, #popped, 2 do
    local id = popped[i]
    local jk = jobKey(jobPrefix, id)
    local f, reason = claimable(jk, id)
    if not f then
      deadLetterRaw(jk, id, keys[4], keys[5], now, reason, queue, popped[i + 1])
      record(keys[8], keys[9], {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'reason', reason, 'error', cjson.encode({message = reason})})
    else
      ok[#ok + 1] = id
      ok[#ok + 1] = f
    end
  end
  started = #ok / 2
  if started > 0 then
    -- Per claim, not per job: one reservation of fencing tokens (top - started + 1 … top),
    -- one ZADD writes the lease deadlines, one HINCRBY counts the starts.
    local top = reserveTokens(keys[6], started)
    -- (numbers turned into text once: Lua formats a number with sprintf each time it is an argument)
    local deadlines, at, deadline = {}, tostring(now), tostring(now + leaseMs)
    -- The `started` events: one entry for the claim (record.lua, appendBatchEvent).
    local ids, tokens, attempts = {}, {}, {}
    local outbox = outboxOn(keys[9], queue)
    for k = 1, started do
      local id, f = ok[2 * k - 1], ok[2 * k]
      local token = top - started + k
      local tokenText = tostring(token)
      local attempt = (tonumber(f[2]) or 0) + 1
      -- (a first attempt, the common case, needs no formatting)
      local attemptText = f[2] == '0' and '1' or tostring(attempt)
      redis.call('HSET', jobKey(jobPrefix, id), 'state', 'active', 'token', tokenText, 'worker', workerId, 'startedAt', at)
      if outbox then
        recordOutbox(keys[8], keys[9], {'type', 'started', 'id', id, 'queue', queue, 'at', at, 'token', tokenText, 'attempt', attemptText, 'worker', workerId})
      end
      ids[k], tokens[k], attempts[k] = id, tokenText, attemptText
      deadlines[2 * k - 1] = deadline
      deadlines[2 * k] = id
      local j = #jobs
      jobs[j + 1] = id
      jobs[j + 2] = token
      jobs[j + 3] = f[1]
      jobs[j + 4] = attempt
      jobs[j + 5] = f[3] or '1'
      jobs[j + 6] = f[4] or '0'
      jobs[j + 7] = f[5] or '0'
      jobs[j + 8] = f[6] or '0'
      jobs[j + 9] = f[7] or ''
      jobs[j + 10] = f[10] or ''
      jobs[j + 11] = f[11] or ''
    end
    if started == 1 then
      -- (one job, the common case at concurrency 1: the per-job form without building lists)
      redis.call('XADD', eventsKeyOf(keys[8], queue), 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'type', 'started', 'id', ids[1],
        'queue', queue, 'at', at, 'token', tokens[1], 'attempt', attempts[1], 'worker', workerId)
    else
      appendBatchEvent(eventsKeyOf(keys[8], queue), 'started', {'queue', queue, 'at', at},
        {'id', ids, 'token', tokens, 'attempt', attempts}, {'worker', workerId})
    end
    callVariadic('ZADD', keys[3], deadlines)
    redis.call('HINCRBY', keys[5], 'started', started)
  end

  -- The window's log gains this claim's starts (one HSET, only on a rate-limited queue).
  if rate and started > 0 then
    kept = kept or {}
    kept[#kept + 1] = now .. ':' .. started
    redis.call('HSET', keys[9], 'rlog:' .. queue, table.concat(kept, ','))
  end

  -- Chain the wake-up: if work may remain (the pop was not cut short), the next blocked
  -- consumer should look too. (A queue emptied by exactly this pop costs one idle look.)
  if #popped == 2 * count and not gated then wake(keys[7]) end

  if nextDue == nil then
    local first = redis.call('ZRANGE', keys[2], '0', '0', 'WITHSCORES')
    nextDue = first[2] and tonumber(first[2]) or -1
  end
  -- Rate-limited: come back when the window has room (or earlier, when a delayed job is due).
  if freeAt and (nextDue < 0 or freeAt < nextDue) then nextDue = freeAt end
  return {jobs, nextDue}
end
