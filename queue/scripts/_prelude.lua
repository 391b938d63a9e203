-- Shared by every Conveyor script (prepended when the script is loaded). Keys of one queue and
-- its pipeline share a hash tag, so job keys built here from `jobPrefix` live in the same slot
-- as the declared KEYS and every script is Redis Cluster-safe.

local function jobKey(jobPrefix, id)
  return jobPrefix .. id
end

-- Every transition is appended to the queue's capped event stream (for followers: `conveyor
-- events`, the typed API) and, when a recorder has switched it on, to the pipeline's
-- outbox: a transactional record drained into PostgreSQL. Queues without PostgreSQL never
-- grow the outbox. Both keys share the pipeline's hash tag with `outboxKey`.
local OUTBOX_MAXLEN = 1000000
local EVENTS_MAXLEN = 10000
local function record(outboxKey, metaKey, fields)
  local queue, event = nil, {'XADD', '', 'MAXLEN', '~', EVENTS_MAXLEN, '*'}
  for i = 1, #fields, 2 do
    if fields[i] == 'queue' then queue = fields[i + 1] end
    -- The job's input can be large: followers get ids and outcomes, not payloads.
    if fields[i] ~= 'data' then
      event[#event + 1] = fields[i]
      event[#event + 1] = fields[i + 1]
    end
  end
  event[2] = string.sub(outboxKey, 1, #outboxKey - 6) .. 'q:' .. queue .. ':events'
  redis.call(unpack(event))
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

-- Result reuse: a stage's result stored under the job's content hash, so a repeated input
-- (the same document) skips the stage. `jobPrefix` is `cvy:{pipeline}:job:`.
local function rememberResult(jobPrefix, queue, contentHash, ttl, result)
  if contentHash ~= '' and tonumber(ttl) > 0 then
    redis.call('SET', string.sub(jobPrefix, 1, #jobPrefix - 4) .. 'result:' .. queue .. ':' .. contentHash, result, 'EX', ttl)
  end
end
