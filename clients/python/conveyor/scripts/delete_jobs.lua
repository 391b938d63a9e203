-- Delete jobs of one queue by id (the dashboard's bulk delete). A deleted job leaves its set
-- (ready, delayed or dead); its record, its log and a set-aside malformed key are deleted; its
-- idempotency key is freed when it still names this job (a new enqueue with that key makes a
-- new job); `deleted` is counted and a `deleted` event recorded (`was` = its state; the job
-- records mark it `deleted`, docs/records.md). A fan-out child that had not finished reports
-- {"id", "error": {"name": "DeletedError"}} to the fan-in, so the join still runs.
-- Refused, nothing changed: a running job (`active`) and a fan-out parent whose children are not
-- all finished (`fannedOut` / `joined`) — cancel it first (cancel_job), then delete it.
-- KEYS: 1 ready, 2 delayed, 3 dead, 4 counts, 5 outbox, 6 meta
-- ARGV: 1 jobPrefix, 2 idempotencyPrefix (the queue's), 3 queue, 4 now (ms), 5… the ids
-- Returns a flat list, two entries per id: outcome (`deleted`, `refused` or `notFound`: no such
-- job in this queue) and the state the job was in (`malformed` for a job key that is not a hash;
-- '' when not found).
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

-- Fan-in. enqueueJoin enqueues a parent's join job with every child's outcome, in child order,
-- and removes the fan-in record (so it happens once).
local function enqueueJoin(jobPrefix, parent, now)
  local base = pipelineBase(jobPrefix)
  local fk = base .. 'fanin:' .. parent
  local f = redis.call('HMGET', fk, 'total', 'join', 'priority', 'attempts', 'trace')
  local total = tonumber(f[1])
  local results = {}
  -- The join's trace context: the fan-out's, and a `link <traceparent>` line per traced child.
  local trace = f[5] and f[5] ~= '' and {f[5]} or nil
  for i = 1, total do
    results[i] = redis.call('HGET', fk, 'r:' .. parent .. ':' .. i) or 'null'
    local link = trace and redis.call('HGET', fk, 'l:' .. parent .. ':' .. i)
    if link then trace[#trace + 1] = 'link ' .. link end
  end
  local joinQueue = f[2]
  local joinId = parent .. ':join'
  local data = '{"parent":' .. cjson.encode(parent) .. ',"results":[' .. table.concat(results, ',') .. ']}'
  local qk = queueKeyPrefix(base, joinQueue)
  local seq = redis.call('INCR', base .. 'seq')
  local score = (1000 - tonumber(f[3])) * 4398046511104 + seq
  redis.call('HSET', jobPrefix .. joinId, 'id', joinId, 'queue', joinQueue, 'data', data, 'priority', f[3], 'score', score,
    'attempts', f[4], 'attemptsMade', 0, 'stalls', 0, 'handbacks', 0, 'timeout', 0, 'createdAt', now, 'state', 'ready', 'joinOf', parent)
  if trace then redis.call('HSET', jobPrefix .. joinId, 'trace', table.concat(trace, '\n')) end
  redis.call('ZADD', qk .. 'ready', score, joinId)
  redis.call('HINCRBY', qk .. 'counts', 'enqueued', 1)
  wake(qk .. 'wake')
  redis.call('DEL', fk)
  if redis.call('EXISTS', jobPrefix .. parent) == 1 then redis.call('HSET', jobPrefix .. parent, 'state', 'joined') end
  record(base .. 'outbox', base .. 'meta', {'type', 'enqueued', 'id', joinId, 'queue', joinQueue, 'at', now, 'from', 'fan-in', 'attempts', f[4], 'data', data})
end

-- A child job (created by fan_out.lua) has finished: completed at its last stage or
-- dead-lettered. Its outcome (a JSON object text) is stored once — HSETNX makes a repeated
-- finish a no-op — and the child that finishes last enqueues the join, so it runs exactly once.
-- `parent`, `trace`: the job's parent and trace fields when the caller has read them already
-- (false: none). The child's trace context (its traceparent) is kept for the join's links.
local function finishChild(jobPrefix, jk, id, outcome, now, parent, trace)
  if parent == nil then
    local f = redis.call('HMGET', jk, 'parent', 'trace')
    parent, trace = f[1], f[2]
  end
  if not parent or parent == '' then return end
  local fk = pipelineBase(jobPrefix) .. 'fanin:' .. parent
  if redis.call('EXISTS', fk) == 0 then return end
  if redis.call('HSETNX', fk, 'r:' .. id, outcome) == 0 then return end
  if trace and trace ~= '' then redis.call('HSET', fk, 'l:' .. id, string.match(trace, '^[^\n]*')) end
  local done = redis.call('HINCRBY', fk, 'done', 1)
  if done >= tonumber(redis.call('HGET', fk, 'total')) then enqueueJoin(jobPrefix, parent, now) end
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

local jobPrefix, idemPrefix, queue = ARGV[1], ARGV[2], ARGV[3]
local now = tonumber(ARGV[4])
local base = pipelineBase(jobPrefix)
local REFUSED = {active = true, fannedOut = true, joined = true}
local DELETED = '{"name":"DeletedError","message":"deleted"}'

-- Whether the id was in one of the queue's sets (removed from all of them).
local function leaveSets(id)
  local n = 0
  for i = 1, 3 do n = n + redis.call('ZREM', KEYS[i], id) end
  return n > 0
end

local out = {}
local deleted = 0
for i = 5, #ARGV do
  local id = ARGV[i]
  local jk = jobKey(jobPrefix, id)
  local f = redis.pcall('HMGET', jk, 'state', 'queue', 'parent', 'trace', 'idempotencyKey', 'finishedAt', 'deadReason')
  local outcome, state = 'notFound', ''
  if f.err then
    -- Not a hash (another client SET it): deleted if it is this queue's.
    if leaveSets(id) then
      redis.call('DEL', jk)
      outcome, state = 'deleted', 'malformed'
    end
  elseif not f[1] then
    -- No record (expired): a leftover set entry is removed, nothing to record.
    if leaveSets(id) then outcome = 'deleted' end
  elseif f[2] == queue then
    state = f[1]
    if REFUSED[state] then
      outcome = 'refused'
    else
      leaveSets(id)
      if f[3] and f[3] ~= '' then
        finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"error":' .. DELETED .. '}', now, f[3], f[4] or false)
      end
      if f[5] and f[5] ~= '' and redis.call('GET', idemPrefix .. f[5]) == id then redis.call('DEL', idemPrefix .. f[5]) end
      redis.call('DEL', jk, malformedKey(jk, id), base .. 'logs:' .. id)
      local fields = {'type', 'deleted', 'id', id, 'queue', queue, 'at', now, 'was', state}
      if f[6] and f[6] ~= '' then
        fields[#fields + 1] = 'finishedAt'
        fields[#fields + 1] = f[6]
      end
      if f[7] and f[7] ~= '' then
        fields[#fields + 1] = 'reason'
        fields[#fields + 1] = f[7]
      end
      record(KEYS[5], KEYS[6], fields)
      outcome = 'deleted'
    end
  end
  if outcome == 'deleted' then deleted = deleted + 1 end
  out[#out + 1] = outcome
  out[#out + 1] = state
end
if deleted > 0 then redis.call('HINCRBY', KEYS[4], 'deleted', deleted) end
return out
