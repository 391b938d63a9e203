-- Enqueue one or more jobs atomically (ready, or delayed when they have a delay).
-- KEYS: 1 ready, 2 delayed, 3 counts, 4 wake, 5 outbox, 6 meta, 7 seq
-- ARGV: 1 jobPrefix, 2 idempotencyPrefix, 3 queue, 4 now (ms), 5 maxPayloadBytes,
--       6 idempotencyTtlSeconds, then per job 9 fields:
--       id, data, priority, delayMs, attempts, timeoutMs, idempotencyKey ('' = none), contentHash,
--       trace (the W3C trace context of the enqueue, see docs/protocol.md; '' = none)
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
-- The same read brings the queue's control fields (control.lua), in the same one command.
local metaFields = {}
local function readMeta(metaKey, queue)
  local f = redis.call('HMGET', metaKey, 'records', 'paused:' .. queue, 'rate:' .. queue, 'rlog:' .. queue)
  recordsOn[metaKey] = f[1] == '1'
  metaFields[metaKey .. ' ' .. queue] = f
  return f
end
-- `fields` always start 'type', t, 'id', id, 'queue', q; a transition that carries the job's
-- input has it as the last pair ('data', …). The input can be large: followers of the event
-- stream get ids and outcomes, not payloads. (No field-by-field copy: this runs twice per job.)
local function record(outboxKey, metaKey, fields)
  local n = #fields
  if fields[n - 1] == 'data' then n = n - 2 end
  local base = string.sub(outboxKey, 1, #outboxKey - 6)
  redis.call('XADD', queueKeyPrefix(base, fields[6]) .. 'events', 'MAXLEN', '~', EVENTS_MAXLEN, '*', unpack(fields, 1, n))
  if recordsOn[metaKey] == nil then readMeta(metaKey, fields[6]) end
  if recordsOn[metaKey] then
    redis.call('XADD', outboxKey, 'MAXLEN', '~', OUTBOX_MAXLEN, '*', unpack(fields))
  end
end
-- Wake one blocked consumer; it re-wakes the next if work remains (see claim_jobs.lua).
local function wake(wakeKey)
  if redis.call('LLEN', wakeKey) == 0 then redis.call('LPUSH', wakeKey, '1') end
end

-- Write one new job record and put it in line: ready, or delayed when `delay` > 0. `keys`:
-- ready, delayed, counts, outbox, meta, seq (the queue's and its pipeline's). `extra`: more
-- record fields ({} for none). Returns true when the job went to ready (the caller wakes a
-- consumer once per call).
local function enqueueJob(keys, jobPrefix, queue, now, id, data, priority, delay, attempts, timeout, idemKey, contentHash, extra)
  -- Higher priority sorts first; a sequence keeps FIFO order within one priority.
  local seq = redis.call('INCR', keys.seq)
  local score = (1000 - priority) * 4398046511104 + seq
  redis.call('HSET', jobKey(jobPrefix, id), 'id', id, 'queue', queue, 'data', data, 'priority', priority,
    'score', score, 'attempts', attempts, 'attemptsMade', 0, 'stalls', 0, 'handbacks', 0,
    'timeout', timeout, 'createdAt', now, 'idempotencyKey', idemKey, 'contentHash', contentHash,
    'state', delay > 0 and 'delayed' or 'ready', unpack(extra))
  if delay > 0 then
    redis.call('ZADD', keys.delayed, now + delay, id)
  else
    redis.call('ZADD', keys.ready, score, id)
  end
  redis.call('HINCRBY', keys.counts, 'enqueued', 1)
  local fields = {'type', 'enqueued', 'id', id, 'queue', queue, 'at', now, 'attempts', attempts}
  if delay > 0 then
    fields[#fields + 1] = 'due'
    fields[#fields + 1] = now + delay
  end
  -- The key is searchable in the records after its Redis key expires.
  if idemKey ~= '' then
    fields[#fields + 1] = 'key'
    fields[#fields + 1] = idemKey
  end
  fields[#fields + 1] = 'data' -- last: see record()
  fields[#fields + 1] = data
  record(keys.outbox, keys.meta, fields)
  return delay <= 0
end

local jobPrefix, idemPrefix, queue = ARGV[1], ARGV[2], ARGV[3]
local now = tonumber(ARGV[4])
local maxBytes = tonumber(ARGV[5])
local idemTtl = tonumber(ARGV[6])
local FIELDS = 9
local keys = {ready = KEYS[1], delayed = KEYS[2], counts = KEYS[3], outbox = KEYS[5], meta = KEYS[6], seq = KEYS[7]}
local out = {}
local woke = false
for i = 7, #ARGV, FIELDS do
  local id, data = ARGV[i], ARGV[i + 1]
  local priority = tonumber(ARGV[i + 2])
  local delay = tonumber(ARGV[i + 3])
  local attempts, timeout = ARGV[i + 4], ARGV[i + 5]
  local idemKey, contentHash, trace = ARGV[i + 6], ARGV[i + 7], ARGV[i + 8]
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
    if enqueueJob(keys, jobPrefix, queue, now, id, data, priority, delay, attempts, timeout, idemKey, contentHash, (trace and trace ~= '') and {'trace', trace} or {}) then
      woke = true
    end
    out[#out + 1] = id
    out[#out + 1] = 1
  end
end
if woke then wake(KEYS[4]) end
return out
