-- Admission (DESIGN.md §7, "Admission happens in one place"): whether a claim may start a job
-- is decided here, inside the claim script, by one composed check — never by a worker after it
-- claimed. The queue's own gate (pause and rate limit, control.lua) bounds how many jobs the
-- whole claim may start; groupRoom says how many more jobs of one group may start now; and for
-- the job the group's turn gives, jobAdmit asks every resource the job `uses` for a key with
-- room (resources.lua; docs/protocol.md, "Resources"). A job with `uses` is always a grouped
-- job (its own group or the implicit `~res:<names>`), so a job no key can afford makes only its
-- group wait in the ring, with a time score, like a group whose rate window is full.

--- @include "control"
--- @include "resources"

-- How many more jobs of group g may start now: 0 when the group is paused, at its concurrency,
-- or its rate window is full (each limit: the group's override, else the queue's default for
-- every group; none = no limit). `running`: the group's jobs holding a lease. `rates`: this
-- claim's rate state per group ({left, kept, at, started}: the window is read once per claim
-- and group, and written once by groupRatesFlush; `clock()`: the claim's Redis time, read only
-- when a window is). Returns the room and, when the window is what stops it, the time it has
-- room again, and the group's weight (its `weight:<g>`, nil = 1).
-- (One HMGET: the limits of g and the defaults.)
local function groupRoom(q, g, running, clock, rates)
  local c = redis.call('HMGET', q .. 'gcontrol', 'paused:' .. g, 'concurrency:' .. g, 'concurrency', 'rate:' .. g, 'rate', 'weight:' .. g)
  if c[1] == '1' then return 0 end
  local limit = tonumber(c[2]) or tonumber(c[3])
  local room = limit and math.max(0, limit - running) or math.huge
  local rate = c[4] or c[5]
  if not rate or room == 0 then return room, nil, c[6] end
  local r = rates[g]
  if not r then
    -- (the same sliding-window log as the queue's rate limit: no window ever over max; kept in
    -- `<Q>g:<g>:rlog`, which expires a window after its last start, so an idle group keeps nothing)
    local log = redis.call('GET', groupRateLogKey(q, g))
    local allowed, kept, _, at, slack = rateAllowance(rate, log, clock(), 1000000000)
    r = {left = allowed, kept = kept, at = at, started = 0, rate = rate, log = log, slack = slack}
    rates[g] = r
  end
  if r.left > 0 then return math.min(room, r.left), nil, c[6] end
  local _, _, freeAt = rateAllowance(r.rate, r.log, clock(), r.started + 1)
  return 0, freeAt
end

-- `n` jobs of group g started in this claim (counted against its window, if it has one).
local function groupRateTaken(rates, g, n)
  local r = rates[g]
  if r then
    r.left = r.left - n
    r.started = r.started + n
  end
end

-- Each rate-limited group's window gains this claim's starts: one SET per such group. Returns
-- the largest start slack of those windows (control.lua, rateSlack), 0 for none.
local function groupRatesFlush(q, rates)
  local slack = 0
  for g, r in pairs(rates) do
    if r.started > 0 then
      r.kept[#r.kept + 1] = r.at .. ':' .. r.started
      local window = tonumber(string.match(r.rate, '/(%d+)$')) or 1
      redis.call('SET', groupRateLogKey(q, g), table.concat(r.kept, ','), 'PX', window + r.slack)
      slack = math.max(slack, r.slack)
    end
  end
  return slack
end

-- Whether the job the ring gave (its claimable fields `f`) may start: true, and its grant (JSON,
-- '' for a job without `uses`), or false, the time to look again and the resource that refused.
-- (`now`: Redis' clock, as for the rate limits.)
local function jobAdmit(resStates, jobPrefix, f, now)
  if not f[16] then return true, nil end
  local grant, due, resource = resourceAdmit(resStates, jobPrefix, f[16], now)
  if grant then return true, grant end
  return false, due, resource
end
