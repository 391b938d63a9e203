-- The operator's poll of many queues on one Redis server in one call: for each queue what
-- backlog_counts returns, its pause and rate limit, and (when asked, on the leader) a
-- sweep_leases. One call for a chunk of queues instead of two or three calls per queue: each
-- call is a command object, an encoding and a reply in the caller, and at 1,000 idle pools
-- that was most of the operator's memory churn (docs/performance.md, operator step 8).
-- Atomic, as the calls it replaces were each.
--
-- KEYS: 11 per queue, queue q (from 0) at 11q+1..11q+11, sweep_leases' keys in its order:
--       inflight, ready, dead, counts, wake, outbox, meta, sweepLock, delayed, workers, sweeper
-- ARGV: 1 the call's record (JSON, includes/wire.lua): now (ms), optional sweep (true: sweep
--       each queue), and with sweep sweep_leases' settings maxStalls, limit, lockMs,
--       workerStaleMs, optional gapMs, graceMs; then 2 per queue from 2+2q: jobPrefix, queue. A
--       record that is not a JSON object or lacks a field: ERR_INVALID_RECORD naming it.
-- Returns one list of name/value pairs per queue, in the order of KEYS: backlog_counts' fields,
-- paused (1; left out when not paused), rate (the rate limit as stored, '<max>/<windowMs>'; left
-- out when none), groupedWaiting (`HGET <Q>gwaiting ''`, 0 without groups; the operator reads the
-- groups' admission only for queues where it is not 0) and, when asked, sweep: sweep_leases'
-- reply (requeued, dead, graceLeftMs). When a part failed (a key of the wrong type) error (the
-- counts) or sweepError holds its message instead: one queue's error is its own.
--- @include "includes/wire"
--- @include "includes/backlogCounts"
--- @include "includes/control"
--- @include "includes/sweepLeases"

-- Redis 7 replicates scripts by effects (TIME before writes is fine); 5 and 6 need asking.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local call, bad = wireRecord('poll_queues call', ARGV[1])
bad = bad or wireRequire('poll_queues call', call, {'now', 'number'})
bad = bad or wireOptional('poll_queues call', call, {'sweep', 'boolean'})
local sweep = call and call.sweep == true
if not bad and sweep then
  bad = wireRequire('poll_queues call', call,
    {'maxStalls', 'number', 'limit', 'number', 'lockMs', 'number', 'workerStaleMs', 'number'})
end
if bad then return redis.error_reply(bad) end
local now = call.now
-- Redis raises a command's error as a table ({err = …}) on Redis 7, as text before.
local function failed(e)
  return type(e) == 'table' and e.err or tostring(e)
end

local out = {}
for q = 0, #KEYS / 11 - 1 do
  local b = 11 * q
  local k = {}
  for i = 1, 11 do k[i] = KEYS[b + i] end
  local jobPrefix, queue = ARGV[2 + 2 * q], ARGV[3 + 2 * q]
  local ok, one = pcall(function()
    local c = backlogCountsNamed(backlogCounts(k[2], k[9], k[1], k[3], k[4], now, jobPrefix))
    local paused, rate = readControl(k[7], queue)
    if paused then
      c[#c + 1] = 'paused'
      c[#c + 1] = 1
    end
    if rate and rate ~= '' then
      c[#c + 1] = 'rate'
      c[#c + 1] = rate
    end
    c[#c + 1] = 'groupedWaiting'
    c[#c + 1] = tonumber(redis.call('HGET', queuePrefixOfReady(k[2]) .. 'gwaiting', '')) or 0
    return c
  end)
  if not ok then one = {'error', failed(one)} end
  if sweep then
    local sok, s = pcall(sweepLeases, k, jobPrefix, queue, now, call.maxStalls, call.limit, call.lockMs,
      call.workerStaleMs, call.gapMs, call.graceMs)
    one[#one + 1] = sok and 'sweep' or 'sweepError'
    one[#one + 1] = sok and {'requeued', s[1], 'dead', s[2], 'graceLeftMs', s[3]} or failed(s)
  end
  out[q + 1] = one
end
return out
