-- A running handler writes a line to its job's log (ctx.log, or the handler callback's /log).
-- Only while the caller holds the lease; the list is capped and expires, so a chatty handler
-- costs Redis a bounded amount. Never called for a job whose handler does not log.
-- KEYS: 1 logs (`<P>logs:<id>`, the job's pipeline slot)
-- ARGV: 1 jobPrefix, 2 id, 3 token, 4 now (ms), 5 line (JSON text), 6 maxLines, 7 ttlSeconds
-- Returns 1, or 0 when the lease was lost (the line is dropped).
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

local jobPrefix, id, token = ARGV[1], ARGV[2], ARGV[3]
if not holdsLease(jobKey(jobPrefix, id), token) then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[5])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[6]), -1)
redis.call('EXPIRE', KEYS[1], ARGV[7])
return 1
