-- Enqueue one or more jobs atomically (ready, or delayed when they have a delay).
-- KEYS: 1 ready, 2 delayed, 3 counts, 4 wake, 5 outbox, 6 meta, 7 seq
-- ARGV: 1 jobPrefix, 2 idempotencyPrefix, 3 queue, 4 now (ms), 5 maxPayloadBytes,
--       6 idempotencyTtlSeconds, then per job 8 fields:
--       id, data, priority, delayMs, attempts, timeoutMs, idempotencyKey ('' = none), contentHash
-- Returns a flat list: id, created (1) or duplicate (0), per job.
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

-- Every transition is appended to the queue's capped event stream (for followers: `conveyor
-- events`, the typed API) and, when a recorder has switched it on, to the pipeline's
-- outbox: a transactional record drained into PostgreSQL. Queues without PostgreSQL never
-- grow the outbox. Both keys share the pipeline's hash tag with `outboxKey`.
local OUTBOX_MAXLEN = 1000000
local EVENTS_MAXLEN = 10000
-- Whether the outbox is on, read once per script call (a script records up to a few transitions).
local recordsOn = {}
-- `fields` always start 'type', t, 'id', id, 'queue', q; a transition that carries the job's
-- input has it as the last pair ('data', …). The input can be large: followers of the event
-- stream get ids and outcomes, not payloads. (No field-by-field copy: this runs twice per job.)
local function record(outboxKey, metaKey, fields)
  local n = #fields
  if fields[n - 1] == 'data' then n = n - 2 end
  local base = string.sub(outboxKey, 1, #outboxKey - 6)
  redis.call('XADD', queueKeyPrefix(base, fields[6]) .. 'events', 'MAXLEN', '~', EVENTS_MAXLEN, '*', unpack(fields, 1, n))
  if recordsOn[metaKey] == nil then recordsOn[metaKey] = redis.call('HGET', metaKey, 'records') == '1' end
  if recordsOn[metaKey] then
    redis.call('XADD', outboxKey, 'MAXLEN', '~', OUTBOX_MAXLEN, '*', unpack(fields))
  end
end
-- Wake one blocked consumer; it re-wakes the next if work remains (see claim_jobs.lua).
local function wake(wakeKey)
  if redis.call('LLEN', wakeKey) == 0 then redis.call('LPUSH', wakeKey, '1') end
end

local jobPrefix, idemPrefix, queue = ARGV[1], ARGV[2], ARGV[3]
local now = tonumber(ARGV[4])
local maxBytes = tonumber(ARGV[5])
local idemTtl = tonumber(ARGV[6])
local FIELDS = 8
local out = {}
local woke = false
for i = 7, #ARGV, FIELDS do
  local id, data = ARGV[i], ARGV[i + 1]
  local priority = tonumber(ARGV[i + 2])
  local delay = tonumber(ARGV[i + 3])
  local attempts, timeout = ARGV[i + 4], ARGV[i + 5]
  local idemKey, contentHash = ARGV[i + 6], ARGV[i + 7]
  if #data > maxBytes then
    return redis.error_reply('ERR_PAYLOAD_TOO_LARGE job ' .. id .. ' is ' .. #data .. ' bytes, limit ' .. maxBytes)
  end
  local existing = false
  if idemKey ~= '' then
    existing = redis.call('GET', idemPrefix .. idemKey)
  end
  local jk = jobKey(jobPrefix, id)
  if not existing and redis.call('EXISTS', jk) == 1 then existing = id end
  if existing then
    out[#out + 1] = existing
    out[#out + 1] = 0
  else
    if idemKey ~= '' then redis.call('SET', idemPrefix .. idemKey, id, 'EX', idemTtl) end
    -- Higher priority sorts first; a sequence keeps FIFO order within one priority.
    local seq = redis.call('INCR', KEYS[7])
    local score = (1000 - priority) * 4398046511104 + seq
    redis.call('HSET', jk, 'id', id, 'queue', queue, 'data', data, 'priority', priority,
      'score', score, 'attempts', attempts, 'attemptsMade', 0, 'stalls', 0, 'handbacks', 0,
      'timeout', timeout, 'createdAt', now, 'idempotencyKey', idemKey, 'contentHash', contentHash,
      'state', delay > 0 and 'delayed' or 'ready')
    if delay > 0 then
      redis.call('ZADD', KEYS[2], now + delay, id)
    else
      redis.call('ZADD', KEYS[1], score, id)
      woke = true
    end
    redis.call('HINCRBY', KEYS[3], 'enqueued', 1)
    local fields = {'type', 'enqueued', 'id', id, 'queue', queue, 'at', now, 'attempts', attempts}
    if delay > 0 then
      fields[#fields + 1] = 'due'
      fields[#fields + 1] = now + delay
    end
    fields[#fields + 1] = 'data' -- last: see record()
    fields[#fields + 1] = data
    record(KEYS[5], KEYS[6], fields)
    out[#out + 1] = id
    out[#out + 1] = 1
  end
end
if woke then wake(KEYS[4]) end
return out
