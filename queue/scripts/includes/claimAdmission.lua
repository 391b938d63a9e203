--- @include "variadic"
--- @include "control"
--- @include "readyLine"

-- The claim's fourth step: the queue's pause and rate limit (control.lua) over the jobs popped
-- (c.ok: claimPop.lua); what may not start goes back where it was. Takes the claim `c`
-- (claimJobs.lua, newClaim); sets c.gated (some went back), c.rate, c.kept and c.slack (the
-- window's log kept and its start slack), c.freeAt (when the window has room, Redis' clock) and
-- c.startAt (the starts' time: the window's clock on a rate-limited queue, else the caller's).
local function claimGate(c)
  c.startAt = c.now
  if c.taken == 0 then return end
  local paused, rate, rlog, layout = readControl(c.keys.meta, c.queue)
  c.refusedLayout = c.refusedLayout or layoutRefused(layout, c.reads)
  c.rate = rate
  local ok = c.ok
  local allowed = #ok / 3
  if paused or c.refusedLayout then
    allowed = 0
  elseif rate then
    allowed, c.kept, c.freeAt, c.startAt, c.slack = rateAllowance(rate, rlog, c.clock(), allowed)
  end
  if allowed >= #ok / 3 then return end
  c.gated = true
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
  if #back > 0 then callVariadic('ZADD', c.keys.ready, back) end
  if #front > 0 then
    -- (LPUSH of the reversed ids puts them back at the head in their order)
    local n = #front
    for i = 1, math.floor(n / 2) do front[i], front[n - i + 1] = front[n - i + 1], front[i] end
    callVariadic('LPUSH', lineKeyOf(c.keys.ready), front)
  end
end

-- After the leases: the window's log gains this claim's `started` starts (one HSET, only on a
-- rate-limited queue), and the claim's start slack is the window's if larger.
local function claimRateLog(c, started)
  if not c.rate or started == 0 then return end
  local kept = c.kept or {}
  kept[#kept + 1] = c.startAt .. ':' .. started
  redis.call('HSET', c.keys.meta, 'rlog:' .. c.queue, table.concat(kept, ','))
  c.startSlack = math.max(c.startSlack, c.slack or 0)
end
