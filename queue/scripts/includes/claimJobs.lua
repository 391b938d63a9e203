--- @include "keys"
--- @include "wake"
--- @include "record"
--- @include "claimable"
--- @include "malformed"
--- @include "promoteDue"
--- @include "control"
--- @include "variadic"
--- @include "readyLine"
--- @include "groups"
--- @include "admission"
--- @include "fencingTokens"

-- The claim (claim_jobs.lua, and the complete-and-claim option of complete_job/advance_job):
-- promote due delayed jobs, pop up to `count` ready jobs by priority (the sorted set of
-- prioritised jobs, then the line of priority-0 jobs: readyLine.lua) and write each lease
-- (deadline + fencing token) in the same step, so a job is never popped without an owner.
-- `keys` are claim_jobs' KEYS: 1 ready, 2 delayed, 3 inflight, 4 dead, 5 counts, 6 fence,
-- 7 wake, 8 outbox, 9 meta. Returns {jobs, nextDueMs, startSlackMs}; jobs is empty, or the
-- names of the per-job fields comma-separated (CLAIM_REPLY_FIELDS) followed by each job's values
-- in that order — the caller reads them by name.
-- (trace: the W3C context the job was created in; requeued: why it last went back to ready;
-- resources: '' or, for a job with `uses`, the keys granted (resources.lua, resourceAdmit));
-- startSlackMs: > 0 when a rate window counted these starts: the caller starts each job within
-- that many ms of sending its call, or hands it back unstarted (control.lua, rateSlack)
-- The claim reply's per-job fields, in the order each job's values follow them: a new field is one
-- more name here and one more value in claimJobs' reply loop.
local CLAIM_REPLY_FIELDS = 'id,token,data,attempt,attempts,timeoutMs,stalls,createdAt,contentHash,trace,requeued,resources'
local function claimJobs(keys, jobPrefix, queue, now, leaseMs, count, workerId)
  local nextDue = promoteDue(jobPrefix, queue, keys[1], keys[2], keys[4], keys[5], now)
  -- Admission (rate windows, ring waits, resources) runs on Redis' clock, read once per claim and
  -- only when a limit needs it (control.lua, serverTimeMs); the fencing tokens reuse the reading.
  -- `now` stays the caller's clock for what the caller compares with its own (delayed jobs, the
  -- reply's nextDueMs).
  local clockMs = nil
  local function clock()
    clockMs = clockMs or serverTimeMs()
    return clockMs
  end
  local callerNow = now

  local jobs = {}
  -- A queue where grouped jobs wait, known for free when this call has read `<P>meta` already
  -- (complete-and-claim, settle_jobs: record.lua readMeta), serves its own (ungrouped) jobs as one
  -- more participant of the round-robin: the ring's member '' (below). Otherwise they go first.
  local metaSeen = metaFields[keys[9] .. ' ' .. queue]
  local mixed = metaSeen ~= nil and metaSeen[5] == '1'
  -- The prioritised jobs first (sorted set), then the line of priority-0 jobs (readyLine.lua).
  local popped = mixed and {} or redis.call('ZPOPMIN', keys[1], count)
  -- Checked before anything changes: a Lua error here would leave the rest of the batch in no set.
  -- ok: id, fields, score (false: from the line), per job that may start.
  local ok = {}
  -- Returns false for a stale line entry, 'dead' for a record dead-lettered here, else true.
  local function check(id, score, group)
    local jk = jobKey(jobPrefix, id)
    local f, reason = claimable(jk, id, (not score) and queue or nil, group)
    if f == false then return false end
    if not f then
      deadLetterRaw(jk, id, keys[4], keys[5], now, reason, queue, score or nil)
      record(keys[8], keys[9], {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'reason', reason, 'error', cjson.encode({message = reason})})
      return 'dead'
    else
      ok[#ok + 1] = id
      ok[#ok + 1] = f
      ok[#ok + 1] = score
    end
    return true
  end
  for i = 1, #popped, 2 do check(popped[i], popped[i + 1]) end
  local taken = #popped / 2
  -- (ids taken from a line by this claim: a second entry of one id is stale)
  local seen = {}
  if taken < count and not mixed then
    local line, stale = lineKeyOf(keys[1]), 0
    -- Stale entries (a cancelled or deleted job's) are skipped and another is popped in their
    -- place; so is a second entry of one id (a deleted id enqueued again) within this claim.
    for _ = 1, 8 do
      local want = count - taken
      local ids = redis.call('LPOP', line, want) or {}
      for _, id in ipairs(ids) do
        if not seen[id] and check(id, false) then
          taken = taken + 1
          seen[id] = true
        else
          stale = stale + 1
        end
      end
      if #ids < want then
        -- The line is empty now: no stale entry is left in it (and a count that drifted resets).
        if #ids > 0 then redis.call('DEL', lineStaleKeyOf(keys[1])) end
        stale = 0
        break
      end
      if taken >= count then break end
    end
    if stale > 0 and redis.call('DECRBY', lineStaleKeyOf(keys[1]), stale) < 0 then redis.call('DEL', lineStaleKeyOf(keys[1])) end
  end
  -- Then the groups (groups.lua), round-robin: only when the queue's own jobs left slots free,
  -- so a queue without groups pays nothing while it has work (and one ZPOPMIN when it runs short).
  -- (groupFreeAt: when the rate limit cut the groups' share, the window's next room)
  local groupFreeAt = nil
  -- (the start slack of the rate windows that counted this claim's starts: control.lua, rateSlack)
  local startSlack = 0
  -- (job id → the resource keys granted to it, for the reply: only jobs with `uses` have one)
  local claimGrants = nil
  -- One of the queue's own jobs for the ring's member '': the prioritised first, then the line
  -- (stale entries skipped and uncounted, as above). Returns check()'s outcome, nil for none.
  local function ungroupedTurn()
    local p = redis.call('ZPOPMIN', keys[1])
    if p[1] then return check(p[1], p[2]) end
    local line, stale, outcome = lineKeyOf(keys[1]), 0, nil
    for _ = 1, 100 do
      local id = redis.call('LPOP', line)
      if not id then
        if stale > 0 then redis.call('DEL', lineStaleKeyOf(keys[1])) end
        return nil
      end
      if not seen[id] then outcome = check(id, false) end
      if outcome then
        seen[id] = true
        break
      end
      stale = stale + 1
    end
    if stale > 0 and redis.call('DECRBY', lineStaleKeyOf(keys[1]), stale) < 0 then redis.call('DEL', lineStaleKeyOf(keys[1])) end
    return outcome
  end
  if taken < count then
    local q = queuePrefixOfReady(keys[1])
    local ring = q .. 'gring'
    -- (one EXISTS of both: an empty sorted set or list is no key)
    if mixed and redis.call('EXISTS', keys[1], lineKeyOf(keys[1])) > 0 then ringAdd(q, '') end
    local turn = redis.call('ZPOPMIN', ring)
    if turn[1] then
      -- The queue's gate first (admission.lua): grouped jobs are taken only as far as pause and
      -- the rate limit allow, so none has to go back (the gate below then allows them all).
      local paused, rate, rlog = readControl(keys[9], queue)
      local room = count - taken
      if paused then
        room = 0
      elseif rate then
        local allowance, _, freeAt = rateAllowance(rate, rlog, clock(), count)
        room = math.min(room, allowance - #ok / 3)
        groupFreeAt = freeAt
      end
      if room <= 0 then redis.call('ZADD', ring, turn[2], turn[1]) end
      local visits = 0
      -- (this claim's per-group rate windows: admission.lua)
      local rates = {}
      -- (this claim's resources, read once each: resources.lua; grants: job id → the keys granted)
      local resStates, grants = {}, nil
      -- Takes up to `want` jobs of group g: its prioritised jobs first, then its line (stale
      -- entries skipped). Returns how many started, how many were dead-lettered here, and
      -- {due, resource} when a job with `uses` found no key with room (docs/protocol.md,
      -- "Resources"): it and the jobs popped after it go back to the head of the group.
      local function groupTake(g, want)
        local started, dead, budgetWait = 0, 0, nil
        -- One popped id: true when it counts (started or dead), false when stale; sets budgetWait.
        local function take(id, score)
          if not score and seen[id] then return false end
          local outcome = check(id, score, g)
          if not outcome then return false end
          if not score then seen[id] = true end
          if outcome == 'dead' then
            dead = dead + 1
            return true
          end
          local f = ok[#ok - 1]
          if f[16] then
            local admitted, grant, resource = jobAdmit(resStates, jobPrefix, f, clock())
            if not admitted then
              ok[#ok], ok[#ok - 1], ok[#ok - 2] = nil, nil, nil
              budgetWait = {grant, resource}
              return false
            end
            grants = grants or {}
            grants[id] = grant
          end
          started = started + 1
          return true
        end
        local p = redis.call('ZPOPMIN', groupReadyKey(q, g), want)
        local back = nil
        for i = 1, #p, 2 do
          if not budgetWait then take(p[i], p[i + 1]) end
          if budgetWait then
            back = back or {}
            back[#back + 1] = p[i + 1]
            back[#back + 1] = p[i]
          end
        end
        if back then callVariadic('ZADD', groupReadyKey(q, g), back) end
        local line = groupLineKey(q, g)
        for _ = 1, 100 do
          local need = want - started - dead
          if budgetWait or need <= 0 then break end
          local ids = redis.call('LPOP', line, need) or {}
          for i, id in ipairs(ids) do
            take(id, false)
            if budgetWait then
              -- (LPUSH of the reversed rest puts it back at the head in its order)
              local rest = {}
              for k = #ids, i, -1 do rest[#rest + 1] = ids[k] end
              callVariadic('LPUSH', line, rest)
              break
            end
          end
          if #ids < need then break end
        end
        return started, dead, budgetWait
      end
      local g, score = turn[1], tonumber(turn[2])
      -- (the slots the groups share, and the ring's other members, read at the first turn that
      -- could take more than one job)
      local slots, others = room, nil
      while g and room > 0 do
        visits = visits + 1
        if score >= RING_WAIT and score - RING_WAIT > clock() then
          -- The lowest score is a group waiting for its window: nobody else is due. Stop here.
          redis.call('ZADD', ring, score, g)
          local due = score - RING_WAIT
          if not groupFreeAt or due < groupFreeAt then groupFreeAt = due end
          break
        end
        if g == '' then
          -- The queue's own jobs' turn: one job, then back at the tail (a turn that finds none
          -- drops the member; the next claim that sees ungrouped work puts it back).
          local outcome = ungroupedTurn()
          if outcome then
            taken = taken + 1
            if outcome == true then room = room - 1 end
            ringAdd(q, '')
          end
        else
        -- (a group's turn: up to the matching `end` below)
        local running = tonumber(redis.call('HGET', q .. 'grunning', g)) or 0
        local groupLeft, rateFreeAt, weight = groupRoom(q, g, running, clock, rates)
        -- (a weighted group takes `weight` turns in a row: groups.lua, groupTurns)
        weight = tonumber(weight) or 1
        local used = weight > 1 and groupTurnsUsed(q, g) or 0
        -- A turn takes the group's share of the claim's slots in one batch (one pop of its jobs,
        -- one write of its counters and of its ring place): the slots over the turns of a round
        -- the claim can see — one per other member of the ring, the group's weight for itself —
        -- at least one job. Alone in the ring (the member '' counts as another), it takes all the
        -- room it has; a claim of one slot, or of fewer slots than groups, takes one job a turn.
        local want = math.min(room, groupLeft)
        local alone = false
        if want > 1 then
          others = others or redis.call('ZCARD', ring)
          alone = others == 0
          if not alone then want = math.min(want, math.max(1, math.floor(slots / (others + weight)))) end
        end
        local started, dead, budgetWait = 0, 0, nil
        if want > 0 then started, dead, budgetWait = groupTake(g, want) end
        local took = started + dead > 0
        local waitingLeft
        if took then
          taken = taken + started + dead
          waitingLeft = groupLeftWaiting(q, g, started + dead)
          if started > 0 then
            -- (a batch is one turn; alone, it ends the round: the next group to join meets a fresh one)
            used = alone and 0 or used + 1
            room = room - started
            redis.call('HINCRBY', q .. 'grunning', g, started)
            groupRateTaken(rates, g, started)
            groupLeft = groupLeft - started
            if groupLeft == 0 and rates[g] and rates[g].left == 0 then
              local _, _, due = rateAllowance(rates[g].rate, rates[g].log, clock(), rates[g].started + 1)
              rateFreeAt = due
            end
          end
        else
          waitingLeft = tonumber(redis.call('HGET', q .. 'gwaiting', g) or 0)
        end
        if score >= RING_WAIT and (took or waitingLeft <= 0) then
          -- (a group that waited for its window or a budget and got in, or has nothing left: no
          -- longer waiting for budget)
          redis.call('HDEL', q .. 'gbudget', g)
        end
        if waitingLeft > 0 then
          if budgetWait then
            -- No key can afford its next job: it waits in the ring for the first key with room.
            redis.call('ZADD', ring, RING_WAIT + budgetWait[1], g)
            redis.call('HSET', q .. 'gbudget', g, budgetWait[2])
            if not groupFreeAt or budgetWait[1] < groupFreeAt then groupFreeAt = budgetWait[1] end
          elseif groupLeft > 0 and took and used < weight and score < RING_WAIT then
            -- A weighted group with turns left keeps its place at the head of the ring.
            redis.call('ZADD', ring, score, g)
          elseif groupLeft > 0 and alone and score < RING_WAIT then
            -- Alone, its own place is the tail.
            redis.call('ZADD', ring, score, g)
            used = 0
          elseif groupLeft > 0 then
            -- Back at the tail while it has work and room ((not taken: 100 stale entries in a
            -- row ended its turn; its work stays).
            ringAdd(q, g)
            used = 0
          elseif rateFreeAt then
            -- Its window is full: it waits in the ring for the time it has room again.
            redis.call('ZADD', ring, RING_WAIT + rateFreeAt, g)
            if not groupFreeAt or rateFreeAt < groupFreeAt then groupFreeAt = rateFreeAt end
          end
          -- (at its concurrency limit or paused: dropped; re-admitted when one of its jobs leaves
          -- running (groupLeftRunning), on resume or a limit change)
        else
          used = 0
        end
        if weight > 1 then groupTurnsKeep(q, g, used, weight) end
        end
        g = nil
        if room > 0 and visits < count + 100 then
          local nxt = redis.call('ZPOPMIN', ring)
          g, score = nxt[1], tonumber(nxt[2])
        end
      end
      startSlack = groupRatesFlush(q, rates)
      resourcesFlush(resStates)
      claimGrants = grants
    end
  end

  -- Pause and rate limit (see control.lua): what may not start goes back where it was.
  local gated, freeAt, rate, kept, slack = false, nil, nil, nil, 0
  -- Jobs started by this claim (the rate limit's log counts them; the reply's field count may grow).
  local started = 0
  if taken > 0 then
    local paused, rlog
    paused, rate, rlog = readControl(keys[9], queue)
    local allowed = #ok / 3
    if paused then
      allowed = 0
    elseif rate then
      -- (`now` moves to the window's clock: the starts are recorded at the time the limit counted them)
      allowed, kept, freeAt, now, slack = rateAllowance(rate, rlog, clock(), allowed)
    end
    if allowed < #ok / 3 then
      gated = true
      local back, front = {}, {}
      for i = 3 * allowed + 1, #ok, 3 do
        if ok[i + 2] then
          back[#back + 1] = ok[i + 2]
          back[#back + 1] = ok[i]
        else
          front[#front + 1] = ok[i]
        end
        ok[i], ok[i + 1], ok[i + 2] = nil, nil, nil
      end
      if #back > 0 then callVariadic('ZADD', keys[1], back) end
      if #front > 0 then
        -- (LPUSH of the reversed ids puts them back at the head in their order)
        local n = #front
        for i = 1, math.floor(n / 2) do front[i], front[n - i + 1] = front[n - i + 1], front[i] end
        callVariadic('LPUSH', lineKeyOf(keys[1]), front)
      end
    end
  end
  started = #ok / 3
  if started > 0 then
    -- Per claim, not per job: one reservation of fencing tokens (top - started + 1 … top),
    -- one ZADD writes the lease deadlines, one HINCRBY counts the starts.
    local top = reserveTokens(keys[6], started, clockMs)
    -- (numbers turned into text once: Lua formats a number with sprintf each time it is an argument)
    local deadlines, at, deadline = {}, tostring(now), tostring(now + leaseMs)
    -- The `started` events: one entry for the claim (record.lua, appendBatchEvent).
    local ids, tokens, attempts = {}, {}, {}
    local outbox = outboxOn(keys[9], queue)
    jobs[1] = CLAIM_REPLY_FIELDS
    for k = 1, started do
      local id, f = ok[3 * k - 2], ok[3 * k - 1]
      local token = top - started + k
      local tokenText = tostring(token)
      local attempt = (tonumber(f[2]) or 0) + 1
      -- (a first attempt, the common case, needs no formatting)
      local attemptText = f[2] == '0' and '1' or tostring(attempt)
      if f[8] then
        redis.call('HSET', jobKey(jobPrefix, id), 'state', 'active', 'token', tokenText, 'worker', workerId, 'startedAt', at)
      else
        -- A line job has no score; a sweeper of the previous layout needs one to put it back
        -- (docs/protocol.md, "Layout versions"): the head of priority 0.
        redis.call('HSET', jobKey(jobPrefix, id), 'state', 'active', 'token', tokenText, 'worker', workerId, 'startedAt', at,
          'score', PRIORITY0_HEAD_SCORE)
      end
      if outbox then
        recordOutbox(keys[8], keys[9], {'type', 'started', 'id', id, 'queue', queue, 'at', at, 'token', tokenText, 'attempt', attemptText, 'worker', workerId})
      end
      ids[k], tokens[k], attempts[k] = id, tokenText, attemptText
      deadlines[2 * k - 1] = deadline
      deadlines[2 * k] = id
      -- (in CLAIM_REPLY_FIELDS' order)
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
      jobs[j + 12] = claimGrants and claimGrants[id] or ''
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
    startSlack = math.max(startSlack, slack)
  end

  -- Chain the wake-up: if work may remain (the pop was not cut short), the next blocked
  -- consumer should look too. (A queue emptied by exactly this pop costs one idle look.)
  if taken >= count and not gated then rewake(keys[7]) end

  if nextDue == nil then
    local first = redis.call('ZRANGE', keys[2], '0', '0', 'WITHSCORES')
    nextDue = first[2] and tonumber(first[2]) or -1
  end
  -- Rate-limited: come back when the window has room (or earlier, when a delayed job is due). The
  -- window's time is Redis'; the reply gives it on the caller's clock, which the caller sleeps by.
  if groupFreeAt and (not freeAt or groupFreeAt < freeAt) then freeAt = groupFreeAt end
  if freeAt then freeAt = freeAt - clockMs + callerNow end
  if freeAt and (nextDue < 0 or freeAt < nextDue) then nextDue = freeAt end
  return {jobs, nextDue, started > 0 and startSlack or 0}
end
