--- @include "record"

-- Queue control: pause and a global rate limit, per queue, kept in the pipeline's meta hash —
-- the pause (`paused:<queue>` = '1' at layout 1; `hold:<queue>` from layout 2 on, where
-- `paused:<queue>` is the fence that keeps the release before layouts off the queue),
-- `rate:<queue>` ('<max>/<windowMs>') and `rlog:<queue>` (the claims of the current window) — so
-- a claim reads them in the HMGET that also reads the outbox flag record() needs for its first
-- transition anyway (readMeta in record.lua): a claim that starts jobs, or follows a completion,
-- pays nothing for it, a claim that pops nothing never reads them, and a rate-limited claim adds
-- one HSET.
local function readControl(metaKey, queue)
  local f = metaFields[metaKey .. ' ' .. queue] or readMeta(metaKey, queue)
  local layout = tonumber(f[7])
  local paused = f[2]
  if layout and layout >= 2 then paused = f[8] end
  return paused == '1', f[3], f[4], layout
end

-- The layout in force, mirrored into `<P>meta` field `layout` at finalize (queue/layout.ts), read
-- in the same HMGET: a claim by a worker whose newest readable layout (`reads`; nil: not checked)
-- is older takes nothing, and says which layout it met (the worker then refuses to work). Returns
-- that layout, or nil when the claim may go on.
local function layoutRefused(layout, reads)
  if layout and reads and layout > reads then return layout end
  return nil
end

-- Redis' own clock in ms. Admission's windows are timed by it, never by the caller's `now`: a
-- caller's clock is another node's (pods on different nodes never share one), and it was read
-- before the call waited its turn (a GC pause, a busy Redis), so stamps from callers would let one
-- window of handler starts hold claims that were really up to their skew or wait apart.
local function serverTimeMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A window counts starts where the handlers start: in the workers, after the claim. A worker
-- starts a job a window counted only within this slack (ms) of sending its claim, else it hands
-- the job back unstarted (the reply's startSlackMs), and an entry counts for its window plus the
-- slack: claims whose starts fit one window are then stamped less than window + slack apart.
local function rateSlack(window)
  return math.min(50, math.ceil(window / 20))
end

-- A sliding-window log: `rlog` is 'time:jobs,time:jobs,…', one entry per claim still inside the
-- window (and its slack), so no window of `windowMs` ever holds more than `max` handler starts
-- (a burst of `max` is allowed, never more). `now` is Redis' clock (serverTimeMs), and the
-- window's clock only moves forward: a claim older than the log's newest entry (Redis' clock
-- stepped back, or a stamp an older release took from a caller's clock) counts as made at that
-- entry's time. Returns how many of `wanted` jobs may start now, the entries kept, (when fewer
-- than wanted may start) when the oldest entry leaves — the next chance —, the claim's time on
-- that clock and the slack.
local function rateAllowance(rate, rlog, now, wanted)
  local max, window = string.match(rate, '^(%d+)/(%d+)$')
  max, window = tonumber(max), tonumber(window)
  if not max or not window or window <= 0 then return wanted, {}, nil, now, 0 end
  local slack = rateSlack(window)
  window = window + slack
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
  return allowed, kept, freeAt, now, slack
end
