--- @include "variadic"
--- @include "groups"
--- @include "admission"
--- @include "control"
--- @include "claimPop"

-- The claim's third step: the groups (groups.lua), round-robin, only when the queue's own jobs
-- left slots free — a queue without groups pays nothing while it has work (and one ZPOPMIN of
-- the ring when it runs short). Each takes the claim `c` (claimJobs.lua, newClaim): jobs that may
-- start go to c.ok (claimPop.lua, claimCheck), c.taken counts them with the dead-lettered; the
-- ring's state for this claim is c.q (the queue's prefix), c.ring, c.room (slots left), c.slots
-- (slots the groups share), c.others (the ring's other members, read once), c.rates (this
-- claim's per-group rate windows: admission.lua), c.resStates (resources read once each:
-- resources.lua) and c.grants (job id → the resource keys granted).

-- Takes up to `want` jobs of group g: its prioritised jobs first, then its line (stale entries
-- skipped). Returns how many started, how many were dead-lettered here, and {due, resource}
-- when a job with `uses` found no key with room (docs/protocol.md, "Resources"): it and the
-- jobs popped after it go back to the head of the group.
local function groupTake(c, g, want)
  local q, ok, seen = c.q, c.ok, c.seen
  local started, dead, budgetWait = 0, 0, nil
  -- One popped id: true when it counts (started or dead), false when stale; sets budgetWait.
  local function take(id, score)
    if not score and seen[id] then return false end
    local outcome = claimCheck(c, id, score, g)
    if not outcome then return false end
    if not score then seen[id] = true end
    if outcome == 'dead' then
      dead = dead + 1
      return true
    end
    local f = ok[#ok - 1]
    if f[16] then
      local admitted, grant, resource = jobAdmit(c.resStates, c.jobPrefix, f, c.clock())
      if not admitted then
        ok[#ok], ok[#ok - 1], ok[#ok - 2] = nil, nil, nil
        budgetWait = {grant, resource}
        return false
      end
      c.grants = c.grants or {}
      c.grants[id] = grant
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

-- Where group g goes in the ring after its turn (popped with `score`): `took` whether the turn
-- counted any job, `alone` whether it was alone in the ring, `groupLeft` its room left,
-- `rateFreeAt` when its window has room again, `budgetWait` as groupTake returns it, `used`
-- and `weight` its turns in a row (groups.lua, groupTurns). Returns the turns used from now.
local function groupPlace(c, g, score, took, alone, groupLeft, rateFreeAt, budgetWait, used, weight, waitingLeft)
  local q, ring = c.q, c.ring
  if score >= RING_WAIT and (took or waitingLeft <= 0) then
    -- (a group that waited for its window or a budget and got in, or has nothing left: no
    -- longer waiting for budget)
    redis.call('HDEL', q .. 'gbudget', g)
  end
  if waitingLeft <= 0 then return 0 end
  if budgetWait then
    -- No key can afford its next job: it waits in the ring for the first key with room.
    redis.call('ZADD', ring, RING_WAIT + budgetWait[1], g)
    redis.call('HSET', q .. 'gbudget', g, budgetWait[2])
    if not c.groupFreeAt or budgetWait[1] < c.groupFreeAt then c.groupFreeAt = budgetWait[1] end
  elseif groupLeft > 0 and took and used < weight and score < RING_WAIT then
    -- A weighted group with turns left keeps its place at the head of the ring.
    redis.call('ZADD', ring, score, g)
  elseif groupLeft > 0 and alone and score < RING_WAIT then
    -- Alone, its own place is the tail.
    redis.call('ZADD', ring, score, g)
    used = 0
  elseif groupLeft > 0 then
    -- Back at the tail while it has work and room (not taken: 100 stale entries in a row ended
    -- its turn; its work stays).
    ringAdd(q, g)
    used = 0
  elseif rateFreeAt then
    -- Its window is full: it waits in the ring for the time it has room again.
    redis.call('ZADD', ring, RING_WAIT + rateFreeAt, g)
    if not c.groupFreeAt or rateFreeAt < c.groupFreeAt then c.groupFreeAt = rateFreeAt end
  end
  -- (at its concurrency limit or paused: dropped; re-admitted when one of its jobs leaves
  -- running (groupLeftRunning), on resume or a limit change)
  return used
end

-- Group g's turn (popped from the ring with `score`): takes its share of the claim's slots in
-- one batch (one pop of its jobs, one write of its counters and of its ring place), then puts
-- it back in the ring (groupPlace).
local function groupTurn(c, g, score)
  local q = c.q
  local running = tonumber(redis.call('HGET', q .. 'grunning', g)) or 0
  local groupLeft, rateFreeAt, weight = groupRoom(q, g, running, c.clock, c.rates)
  -- (a weighted group takes `weight` turns in a row: groups.lua, groupTurns)
  weight = tonumber(weight) or 1
  local used = weight > 1 and groupTurnsUsed(q, g) or 0
  -- Its share: the slots over the turns of a round the claim can see — one per other member of
  -- the ring, the group's weight for itself — at least one job. Alone in the ring (the member
  -- '' counts as another), it takes all the room it has; a claim of one slot, or of fewer slots
  -- than groups, takes one job a turn.
  local want = math.min(c.room, groupLeft)
  local alone = false
  if want > 1 then
    c.others = c.others or redis.call('ZCARD', c.ring)
    alone = c.others == 0
    if not alone then want = math.min(want, math.max(1, math.floor(c.slots / (c.others + weight)))) end
  end
  local started, dead, budgetWait = 0, 0, nil
  if want > 0 then started, dead, budgetWait = groupTake(c, g, want) end
  local took = started + dead > 0
  local waitingLeft
  if took then
    c.taken = c.taken + started + dead
    waitingLeft = groupLeftWaiting(q, g, started + dead)
    if started > 0 then
      -- (a batch is one turn; alone, it ends the round: the next group to join meets a fresh one)
      used = alone and 0 or used + 1
      c.room = c.room - started
      redis.call('HINCRBY', q .. 'grunning', g, started)
      groupRateTaken(c.rates, g, started)
      groupLeft = groupLeft - started
      local rates = c.rates
      if groupLeft == 0 and rates[g] and rates[g].left == 0 then
        local _, _, due = rateAllowance(rates[g].rate, rates[g].log, c.clock(), rates[g].started + 1)
        rateFreeAt = due
      end
    end
  else
    waitingLeft = tonumber(redis.call('HGET', q .. 'gwaiting', g) or 0)
  end
  used = groupPlace(c, g, score, took, alone, groupLeft, rateFreeAt, budgetWait, used, weight, waitingLeft)
  if weight > 1 then groupTurnsKeep(q, g, used, weight) end
end

-- The round-robin: the queue's gate first (grouped jobs are taken only as far as pause and the
-- rate limit allow, so none has to go back: claimAdmission.lua then allows them all), then
-- turns until the slots are used or the ring has no member due.
local function claimGroups(c)
  local keys = c.keys
  local q = queuePrefixOfReady(keys.ready)
  local ring = q .. 'gring'
  c.q, c.ring = q, ring
  -- (one EXISTS of both: an empty sorted set or list is no key)
  if c.mixed and redis.call('EXISTS', keys.ready, lineKeyOf(keys.ready)) > 0 then ringAdd(q, '') end
  local turn = redis.call('ZPOPMIN', ring)
  if not turn[1] then return end
  local paused, rate, rlog, layout = readControl(keys.meta, c.queue)
  c.refusedLayout = layoutRefused(layout, c.reads)
  local room = c.count - c.taken
  if paused or c.refusedLayout then
    room = 0
  elseif rate then
    local allowance, _, freeAt = rateAllowance(rate, rlog, c.clock(), c.count)
    room = math.min(room, allowance - #c.ok / 3)
    c.groupFreeAt = freeAt
  end
  if room <= 0 then redis.call('ZADD', ring, turn[2], turn[1]) end
  c.room, c.slots, c.others, c.rates, c.resStates = room, room, nil, {}, {}
  local visits = 0
  local g, score = turn[1], tonumber(turn[2])
  while g and c.room > 0 do
    visits = visits + 1
    if score >= RING_WAIT and score - RING_WAIT > c.clock() then
      -- The lowest score is a group waiting for its window: nobody else is due. Stop here.
      redis.call('ZADD', ring, score, g)
      local due = score - RING_WAIT
      if not c.groupFreeAt or due < c.groupFreeAt then c.groupFreeAt = due end
      break
    end
    if g == '' then
      -- The queue's own jobs' turn: one job, then back at the tail (a turn that finds none
      -- drops the member; the next claim that sees ungrouped work puts it back).
      local outcome = ungroupedTurn(c)
      if outcome then
        c.taken = c.taken + 1
        if outcome == true then c.room = c.room - 1 end
        ringAdd(q, '')
      end
    else
      groupTurn(c, g, score)
    end
    g = nil
    if c.room > 0 and visits < c.count + 100 then
      local nxt = redis.call('ZPOPMIN', ring)
      g, score = nxt[1], tonumber(nxt[2])
    end
  end
  c.startSlack = groupRatesFlush(q, c.rates)
  resourcesFlush(c.resStates)
end
