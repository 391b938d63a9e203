--- @include "record"

-- Queue control: pause and a global rate limit, per queue, kept in the pipeline's meta hash —
-- `paused:<queue>` ('1'), `rate:<queue>` ('<max>/<windowMs>') and `rlog:<queue>` (the claims of
-- the current window) — so a claim reads them in the HMGET that also reads the outbox flag
-- record() needs for its first transition anyway (readMeta in record.lua): a claim that starts
-- jobs, or follows a completion, pays nothing for it,
-- a claim that pops nothing never reads them, and a rate-limited claim adds one HSET.
local function readControl(metaKey, queue)
  local f = metaFields[metaKey .. ' ' .. queue] or readMeta(metaKey, queue)
  return f[2] == '1', f[3], f[4]
end

-- A sliding-window log: `rlog` is 'time:jobs,time:jobs,…', one entry per claim still inside the
-- window, so no window of `windowMs` ever holds more than `max` starts (a burst of `max` is
-- allowed, never more). The window's clock only moves forward: a claim whose `now` (the
-- caller's clock, taken before its call reached Redis) is older than the log's newest entry counts
-- as made at that entry's time — otherwise claims arriving out of order could each fit their own
-- window and together overfill a later one. Returns how many of `wanted` jobs may start now, the
-- entries kept, (when fewer than wanted may start) when the oldest entry leaves the window — the
-- next chance — and the claim's time on that clock.
local function rateAllowance(rate, rlog, now, wanted)
  local max, window = string.match(rate, '^(%d+)/(%d+)$')
  max, window = tonumber(max), tonumber(window)
  if not max or not window or window <= 0 then return wanted, {}, nil, now end
  for t in string.gmatch(rlog or '', '(%d+):%d+') do
    t = tonumber(t)
    if t > now then now = t end
  end
  local kept, used, oldest = {}, 0, nil
  for t, n in string.gmatch(rlog or '', '(%d+):(%d+)') do
    t = tonumber(t)
    if t > now - window then
      kept[#kept + 1] = t .. ':' .. n
      used = used + tonumber(n)
      if not oldest or t < oldest then oldest = t end
    end
  end
  local allowed = math.max(0, math.min(wanted, max - used))
  local freeAt = nil
  if allowed < wanted then freeAt = (oldest or now) + window end
  return allowed, kept, freeAt, now
end
