-- Outcome counters per worker template version, for judging a canary (docs/rollouts.md):
-- `<Q>versions`, one hash per queue, fields `<version>:<counter>`:
--   h<b>  completed attempts by run time, b = 0 below 1 ms, else [2^(b-1), 2^b) ms (up to h24);
--         their sum is the version's completions, and the buckets are enough for a p95
--   f     attempts the handler failed (exception, timeout, invalid result), retried or not
--   d     of those, the ones that dead-lettered the job
--   o     jobs handed back for what is not the handler's doing (a dependency, a rate limit, a drain)
-- A worker without a version ('') counts nothing here.
local VERSION_TOP_BUCKET = 24

local function versionsKeyOf(countsKey)
  return string.sub(countsKey, 1, #countsKey - 6) .. 'versions'
end

local function versionBucket(ms)
  local b, top = 0, 1
  while b < VERSION_TOP_BUCKET and ms >= top do
    b = b + 1
    top = top * 2
  end
  return b
end

local function countForVersion(countsKey, version, counter)
  if version and version ~= '' then
    redis.call('HINCRBY', versionsKeyOf(countsKey), version .. ':' .. counter, 1)
  end
end
