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
      local reason = 'malformed: job record missing or has no score'
      deadLetterRaw(jk, id, deadKey, countsKey, now, reason, queue)
      local base = string.sub(jobPrefix, 1, #jobPrefix - 4)
      record(base .. 'outbox', base .. 'meta', {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'reason', reason})
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

-- Fan-in. enqueueJoin enqueues a parent's join job with every child's outcome, in child order,
-- and removes the fan-in record (so it happens once).
local function enqueueJoin(jobPrefix, parent, now)
  local base = string.sub(jobPrefix, 1, #jobPrefix - 4)
  local fk = base .. 'fanin:' .. parent
  local f = redis.call('HMGET', fk, 'total', 'join', 'priority', 'attempts')
  local total = tonumber(f[1])
  local results = {}
  for i = 1, total do
    results[i] = redis.call('HGET', fk, 'r:' .. parent .. ':' .. i) or 'null'
  end
  local joinQueue = f[2]
  local joinId = parent .. ':join'
  local data = '{"parent":' .. cjson.encode(parent) .. ',"results":[' .. table.concat(results, ',') .. ']}'
  local qk = base .. 'q:' .. joinQueue .. ':'
  local seq = redis.call('INCR', base .. 'seq')
  local score = (1000 - tonumber(f[3])) * 4398046511104 + seq
  redis.call('HSET', jobPrefix .. joinId, 'id', joinId, 'queue', joinQueue, 'data', data, 'priority', f[3], 'score', score,
    'attempts', f[4], 'attemptsMade', 0, 'stalls', 0, 'handbacks', 0, 'timeout', 0, 'createdAt', now, 'state', 'ready', 'joinOf', parent)
  redis.call('ZADD', qk .. 'ready', score, joinId)
  redis.call('HINCRBY', qk .. 'counts', 'enqueued', 1)
  wake(qk .. 'wake')
  redis.call('DEL', fk)
  if redis.call('EXISTS', jobPrefix .. parent) == 1 then redis.call('HSET', jobPrefix .. parent, 'state', 'joined') end
  record(base .. 'outbox', base .. 'meta', {'type', 'enqueued', 'id', joinId, 'queue', joinQueue, 'at', now, 'data', data, 'from', 'fan-in', 'attempts', f[4]})
end

-- A child job (created by fan_out.lua) has finished: completed at its last stage or
-- dead-lettered. Its outcome (a JSON object text) is stored once — HSETNX makes a repeated
-- finish a no-op — and the child that finishes last enqueues the join, so it runs exactly once.
local function finishChild(jobPrefix, jk, id, outcome, now)
  local parent = redis.call('HGET', jk, 'parent')
  if not parent or parent == '' then return end
  local fk = string.sub(jobPrefix, 1, #jobPrefix - 4) .. 'fanin:' .. parent
  if redis.call('EXISTS', fk) == 0 then return end
  if redis.call('HSETNX', fk, 'r:' .. id, outcome) == 0 then return end
  local done = redis.call('HINCRBY', fk, 'done', 1)
  if done >= tonumber(redis.call('HGET', fk, 'total')) then enqueueJoin(jobPrefix, parent, now) end
end
