-- Admission (DESIGN.md §7, "Admission happens in one place"): whether a claim may start a job
-- is decided here, inside the claim script, by one composed check — never by a worker after it
-- claimed. The queue's own gate (pause and rate limit, control.lua) bounds how many jobs the
-- whole claim may start; groupRoom says how many more jobs of one group may start now. A
-- resource budget (issue 32) is one more factor of the same form: given the candidate job and
-- its group, how many more may start (0 = not now), read from one hash per queue and charged
-- when the claim starts the job, released by the same paths that release a group slot
-- (groupLeftRunning) — so budgets inherit "limits survive crashes": a swept lease frees both.

-- How many more jobs of group g may start now: 0 when the group is paused or at its
-- concurrency (the group's override, else the queue's default for every group; none = no limit).
-- `running`: the group's jobs holding a lease. (One HMGET: the limits of g and the default.)
local function groupRoom(q, g, running)
  local c = redis.call('HMGET', q .. 'gcontrol', 'paused:' .. g, 'concurrency:' .. g, 'concurrency')
  if c[1] == '1' then return 0 end
  local limit = tonumber(c[2]) or tonumber(c[3])
  if not limit then return math.huge end
  return math.max(0, limit - running)
end
