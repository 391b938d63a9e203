-- The batched lease heartbeat: extend every lease this worker still holds, in one call, and
-- report the worker's busy/idle state for the operator's scale-in choice.
-- KEYS: 1 inflight, 2 workers
-- ARGV: 1 jobPrefix, 2 now (ms), 3 leaseMs, 4 workerId, 5 workerInfo (JSON, '' = none),
--       then id, token pairs
-- Returns {lost, cancelled}: the ids whose lease this worker no longer holds (fenced off), and
-- those among them that were cancelled (the worker aborts their handlers with a cancel reason).
-- Key names the scripts build themselves, as queue/keys.ts lays them out. Keys of one queue and
-- its pipeline share a hash tag, so names built here from `jobPrefix` (`cvy:{pipeline}:job:`)
-- live in the same slot as the declared KEYS and every script is Redis Cluster-safe.
local function jobKey(jobPrefix, id)
  return jobPrefix .. id
end

local function pipelineBase(jobPrefix)
  return string.sub(jobPrefix, 1, #jobPrefix - 4)
end
local function queueKeyPrefix(base, queue)
  return base .. 'q:' .. queue .. ':'
end
-- The fencing check: only the holder of the current lease token may act on a job.
local function leaseHeld(current, token)
  return current ~= false and current ~= '' and current == token
end
local function holdsLease(jk, token)
  return leaseHeld(redis.call('HGET', jk, 'token'), token)
end

-- Why a caller does not hold the lease: nil when it does; 'cancelled' when the job was
-- cancelled (its late result is refused, not counted as fenced); 'lost' otherwise. The same one
-- command as holdsLease.
local function leaseProblem(jk, token)
  local f = redis.call('HMGET', jk, 'token', 'state')
  if leaseHeld(f[1], token) then return nil end
  if f[2] == 'cancelled' then return 'cancelled' end
  return 'lost'
end

local jobPrefix = ARGV[1]
local deadline = tonumber(ARGV[2]) + tonumber(ARGV[3])
local lost, cancelled = {}, {}
for i = 6, #ARGV, 2 do
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
return {lost, cancelled}
