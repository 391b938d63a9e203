--- @include "keys"

-- Result reuse: a stage's result stored under the job's content hash, so a repeated input
-- (the same document) skips the stage. `jobPrefix` is `cvy:{pipeline}:job:`.
local function rememberResult(jobPrefix, queue, contentHash, ttl, result)
  if contentHash ~= '' and tonumber(ttl) > 0 then
    redis.call('SET', pipelineBase(jobPrefix) .. 'result:' .. queue .. ':' .. contentHash, result, 'EX', ttl)
  end
end
