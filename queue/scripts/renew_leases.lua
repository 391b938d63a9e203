-- The batched lease heartbeat: extend every lease this worker still holds, in one call, report
-- the worker's busy/idle state for the operator's scale-in choice, and read whether the operator
-- has cordoned the worker's pod (a scale-in waits for it: claim nothing new).
-- KEYS: 1 inflight, 2 workers, 3 cordon
-- ARGV: 1 jobPrefix, 2 now (ms), 3 leaseMs, 4 workerId, 5 workerInfo (JSON, '' = none),
--       6 pod ('' = none), then id, token pairs
-- Returns {lost, cancelled, cordonedUntil}: the ids whose lease this worker no longer holds
-- (fenced off), those among them that were cancelled (the worker aborts their handlers with a
-- cancel reason), and until when (ms) the pod is cordoned ('' = not).
--- @include "includes/keys"
--- @include "includes/lease"

local jobPrefix = ARGV[1]
local deadline = tonumber(ARGV[2]) + tonumber(ARGV[3])
local lost, cancelled = {}, {}
for i = 7, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local problem = leaseProblem(jobKey(jobPrefix, id), token)
  if not problem then
    redis.call('ZADD', KEYS[1], 'XX', deadline, id)
  else
    lost[#lost + 1] = id
    if problem == 'cancelled' then cancelled[#cancelled + 1] = id end
  end
end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[2], ARGV[4], ARGV[5]) end
local cordonedUntil = ''
if ARGV[6] ~= '' then
  local cordonEnd = tonumber(redis.call('HGET', KEYS[3], ARGV[6]))
  if cordonEnd and cordonEnd > tonumber(ARGV[2]) then cordonedUntil = tostring(cordonEnd) end
end
return {lost, cancelled, cordonedUntil}
