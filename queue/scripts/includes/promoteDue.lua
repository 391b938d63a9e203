--- @include "keys"
--- @include "numbers"
--- @include "malformed"
--- @include "record"

-- Move delayed jobs whose time has come to ready (bounded per call). Returns the earliest
-- delayed job's due time (-1: none) when nothing was moved — the common case costs one
-- command, and the caller need not look again; nil when it must.
local function promoteDue(jobPrefix, queue, readyKey, delayedKey, deadKey, countsKey, now)
  local first = redis.call('ZRANGE', delayedKey, '0', '0', 'WITHSCORES')
  if not first[2] then return -1 end
  local firstDue = tonumber(first[2])
  if firstDue and firstDue > now then return firstDue end
  local due = redis.call('ZRANGEBYSCORE', delayedKey, '-inf', now, 'LIMIT', 0, 1000)
  for _, id in ipairs(due) do
    local jk = jobKey(jobPrefix, id)
    redis.call('ZREM', delayedKey, id)
    local score = redis.pcall('HGET', jk, 'score')
    score = type(score) == 'string' and numericScore(score)
    if score then
      redis.call('HSET', jk, 'state', 'ready')
      redis.call('ZADD', readyKey, score, id)
    else
      local reason = notAHash(jk, id) or 'malformed: job record missing or has no numeric score'
      deadLetterRaw(jk, id, deadKey, countsKey, now, reason, queue)
      local base = pipelineBase(jobPrefix)
      record(base .. 'outbox', base .. 'meta', {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'reason', reason})
    end
  end
  return nil
end
