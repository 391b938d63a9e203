--- @include "numbers"

-- A job key that is not a hash (another client SET it) cannot hold a dead letter's fields: it
-- is renamed to `P malformed:<id>` for a week and a dead-letter record takes its place.
local MALFORMED_TTL_SECONDS = 7 * 24 * 3600
local function malformedKey(jk, id)
  return string.sub(jk, 1, #jk - #id - 4) .. 'malformed:' .. id
end
-- The dead-letter reason when the job key exists and is not a hash; nil otherwise.
local function notAHash(jk, id)
  local t = redis.call('TYPE', jk)['ok']
  if t == 'none' or t == 'hash' then return nil end
  return 'malformed: job key is a ' .. t .. ', not a hash (moved to ' .. malformedKey(jk, id) .. ' for 7 days)'
end

-- Dead-letter a job whose record is unusable, keeping the raw entry for inspection. `score`
-- (optional: its ready-set score) is stored when the record has no numeric one, so
-- `conveyor dlq retry` can put a repaired record back at its place in line.
local function deadLetterRaw(jk, id, deadKey, countsKey, now, reason, queue, score)
  if notAHash(jk, id) then
    local aside = malformedKey(jk, id)
    redis.call('RENAME', jk, aside)
    redis.call('EXPIRE', aside, MALFORMED_TTL_SECONDS)
  end
  redis.call('HSET', jk, 'id', id, 'queue', queue, 'state', 'dead', 'deadReason', reason, 'finishedAt', now)
  if score and not numericScore(redis.call('HGET', jk, 'score')) then redis.call('HSET', jk, 'score', score) end
  redis.call('ZADD', deadKey, now, id)
  redis.call('HINCRBY', countsKey, 'dead', 1)
end
