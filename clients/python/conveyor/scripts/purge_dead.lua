-- Delete up to `limit` dead-lettered jobs and their records (and a malformed key set aside).
-- KEYS: 1 dead
-- ARGV: 1 jobPrefix, 2 limit
-- Returns the number purged (call again until 0 for a large dead-letter set).
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
-- Records written by other producers are checked before a script changes anything: Redis does
-- not roll a script back, so an error after a ZPOPMIN or ZREM would leave the job in no set.
-- A score ZADD accepts, as a number; nil when missing, not a number, NaN or infinite.
local function numericScore(raw)
  local n = tonumber(raw)
  if n and n == n and n > -math.huge and n < math.huge then return n end
  return nil
end

-- A counter HINCRBY accepts (Redis' strict integer syntax, well inside 64 bits).
local function isCounter(raw)
  return raw == '0' or (#raw <= 18 and string.match(raw, '^%-?[1-9]%d*$') ~= nil)
end

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

local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
for _, id in ipairs(ids) do
  local jk = jobKey(ARGV[1], id)
  redis.call('DEL', jk, malformedKey(jk, id))
  redis.call('ZREM', KEYS[1], id)
end
return #ids
