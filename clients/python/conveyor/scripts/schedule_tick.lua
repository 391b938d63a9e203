-- Put a schedule's next tick in line: one delayed job `sched:<name>:<tickMs>` whose data is the
-- schedule's. The schedule's `next:<name>` field only moves forward, so each tick is enqueued at
-- most once — whoever computes it (the worker running the previous tick, a second worker after a
-- stall, `schedule add`) — and a tick of a schedule removed or replaced meanwhile is not.
-- KEYS: 1 schedules, 2 ready, 3 delayed, 4 counts, 5 wake, 6 outbox, 7 meta, 8 seq
-- ARGV: 1 jobPrefix, 2 queue, 3 now (ms), 4 name, 5 version ('' = any), 6 tick (ms)
-- Returns 1 when the tick was enqueued, 0 when not (schedule gone or replaced, tick not later).
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

local jobPrefix, queue, now, name, version, tick = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], tonumber(ARGV[6])
local entry = redis.call('HGET', KEYS[1], name)
if not entry then return 0 end
local ok, spec = pcall(cjson.decode, entry)
if not ok or type(spec) ~= 'table' then return 0 end
if version ~= '' and tostring(spec.version) ~= version then return 0 end
local last = tonumber(redis.call('HGET', KEYS[1], 'next:' .. name) or '')
if last and tick <= last then return 0 end
redis.call('HSET', KEYS[1], 'next:' .. name, tick)
local id = 'sched:' .. name .. ':' .. tick
if redis.call('EXISTS', jobKey(jobPrefix, id)) == 1 then return 0 end
local keys = {ready = KEYS[2], delayed = KEYS[3], counts = KEYS[4], outbox = KEYS[6], meta = KEYS[7], seq = KEYS[8]}
local data = type(spec.data) == 'string' and spec.data or 'null'
local delay = math.max(0, tick - now)
if enqueueJob(keys, jobPrefix, queue, now, id, data, 0, delay, tostring(spec.attempts or 3), '0', '', '', {'schedule', name}) then
  wake(KEYS[5])
end
return 1
