-- The operator's poll of many queues on one Redis server in one call: for each queue what
-- backlog_counts returns, its pause and rate limit, and (when asked, on the leader) a
-- sweep_leases. One call for a chunk of queues instead of two or three calls per queue: each
-- call is a command object, an encoding and a reply in the caller, and at 1,000 idle pools
-- that was most of the operator's memory churn (docs/performance.md, operator step 8).
-- Atomic, as the calls it replaces were each.
--
-- KEYS: 11 per queue, queue q (from 0) at 11q+1..11q+11, sweep_leases' keys in its order:
--       inflight, ready, dead, counts, wake, outbox, meta, sweepLock, delayed, workers, sweeper
-- ARGV: 1 now (ms), 2 sweep ('1' or '0'), 3 maxStalls, 4 limit, 5 lockMs, 6 workerStaleMs,
--       7 gapMs, 8 graceMs (3–8 as sweep_leases' 4–9), then 2 per queue from 9+2q: jobPrefix, queue
-- Returns one reply per queue, in the order of KEYS: {counts, sweep}. counts is backlog_counts'
-- 11 values, then paused ('1' or '') and the rate limit as stored ('<max>/<windowMs>' or ''),
-- then the jobs waiting in groups (`HGET <Q>gwaiting ''`, 0 without groups; the operator reads the
-- groups' admission only for queues where it is not 0), then backlog_counts' 12th, the flow jobs
-- waiting for their parents (waitingChildren); sweep
-- is sweep_leases' {requeued, deadLettered, graceLeftMs}, or {} when not asked. Either is
-- {message} instead when that part failed (a key of the wrong type): one queue's error is its own.
--- @include "includes/backlogCounts"
--- @include "includes/control"
--- @include "includes/sweepLeases"

-- Redis 7 replicates scripts by effects (TIME before writes is fine); 5 and 6 need asking.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local now = tonumber(ARGV[1])
local sweep = ARGV[2] == '1'
-- Redis raises a command's error as a table ({err = …}) on Redis 7, as text before.
local function failed(e)
  return {type(e) == 'table' and e.err or tostring(e)}
end

local out = {}
for q = 0, #KEYS / 11 - 1 do
  local b = 11 * q
  local k = {}
  for i = 1, 11 do k[i] = KEYS[b + i] end
  local jobPrefix, queue = ARGV[9 + 2 * q], ARGV[10 + 2 * q]
  local ok, counts = pcall(function()
    local c = backlogCounts(k[2], k[9], k[1], k[3], k[4], now, jobPrefix)
    local paused, rate = readControl(k[7], queue)
    local waitingChildren = c[12]
    c[12], c[13] = paused and '1' or '', rate or ''
    c[14] = tonumber(redis.call('HGET', queuePrefixOfReady(k[2]) .. 'gwaiting', '')) or 0
    c[15] = waitingChildren
    return c
  end)
  if not ok then counts = failed(counts) end
  local swept = {}
  if sweep then
    local sok, s = pcall(sweepLeases, k, jobPrefix, queue, now, tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
    swept = sok and s or failed(s)
  end
  out[q + 1] = {counts, swept}
end
return out
