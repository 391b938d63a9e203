--- @include "keys"
--- @include "numbers"

-- The score for putting a running job back into a ready set (release_job, advance_job), read
-- before the script changes anything. claim_jobs made sure the record had a numeric one; a
-- record changed while its job ran gets a fresh place behind the jobs of its priority.
local function requeueScore(jobPrefix, jk)
  local f = redis.call('HMGET', jk, 'score', 'priority')
  local score = numericScore(f[1])
  if score then return score end
  local p = numericScore(f[2]) or 0
  if p < 0 or p > 1000 then p = 0 end
  score = (1000 - math.floor(p)) * 4398046511104 + redis.call('INCR', pipelineBase(jobPrefix) .. 'seq')
  redis.call('HSET', jk, 'score', score)
  return score
end
