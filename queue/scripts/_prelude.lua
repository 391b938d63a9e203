-- Shared by every Conveyor script (prepended when the script is loaded). Keys of one queue and
-- its pipeline share a hash tag, so job keys built here from `jobPrefix` live in the same slot
-- as the declared KEYS and every script is Redis Cluster-safe.

local function jobKey(jobPrefix, id)
  return jobPrefix .. id
end

-- The outbox is a transactional record of every transition, drained into PostgreSQL by
-- workers that have a database. It is written only when a recorder has switched it on,
-- so queues without PostgreSQL never grow it.
local OUTBOX_MAXLEN = 1000000
local function record(outboxKey, metaKey, fields)
  if redis.call('HGET', metaKey, 'records') == '1' then
    local args = {'XADD', outboxKey, 'MAXLEN', '~', OUTBOX_MAXLEN, '*'}
    for i = 1, #fields do args[#args + 1] = fields[i] end
    redis.call(unpack(args))
  end
end

-- The fencing check: only the holder of the current lease token may act on a job.
local function holdsLease(jk, token)
  local current = redis.call('HGET', jk, 'token')
  return current ~= false and current ~= '' and current == token
end

-- Wake one blocked consumer; it re-wakes the next if work remains (see claim_jobs.lua).
local function wake(wakeKey)
  redis.call('LPUSH', wakeKey, '1')
  redis.call('LTRIM', wakeKey, 0, 0)
end

-- Dead-letter a job whose record is unusable, keeping the raw entry for inspection.
local function deadLetterRaw(jk, id, deadKey, countsKey, now, reason, queue)
  redis.call('HSET', jk, 'id', id, 'queue', queue, 'state', 'dead', 'deadReason', reason, 'finishedAt', now)
  redis.call('ZADD', deadKey, now, id)
  redis.call('HINCRBY', countsKey, 'dead', 1)
end

-- Move delayed jobs whose time has come to ready (bounded per call).
local function promoteDue(jobPrefix, queue, readyKey, delayedKey, deadKey, countsKey, now)
  local due = redis.call('ZRANGEBYSCORE', delayedKey, '-inf', now, 'LIMIT', 0, 1000)
  for _, id in ipairs(due) do
    local jk = jobKey(jobPrefix, id)
    redis.call('ZREM', delayedKey, id)
    local score = redis.call('HGET', jk, 'score')
    if score then
      redis.call('HSET', jk, 'state', 'ready')
      redis.call('ZADD', readyKey, score, id)
    else
      deadLetterRaw(jk, id, deadKey, countsKey, now, 'malformed: job record missing or has no score', queue)
    end
  end
  return #due
end
