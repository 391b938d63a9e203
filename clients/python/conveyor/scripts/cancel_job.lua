-- Cancel a job wherever it is. Waiting (ready) or delayed: it leaves its set. Running: it leaves
-- the in-flight set and its token is cleared, so the worker's renewal reports it cancelled (the
-- handler is aborted) and its late result is refused. A fan-out parent: its fan-in record is
-- deleted (the join never runs) and its unfinished children (and a join not yet finished) are
-- cancelled the same way. The record stays, state `cancelled`, for `retentionSeconds`; every
-- cancelled job gets a `cancelled` event. A finished job (completed, dead, cancelled) is left as it is.
-- KEYS: 1 outbox, 2 meta (the pipeline's)
-- ARGV: 1 jobPrefix, 2 id, 3 now (ms), 4 retentionSeconds (0 = keep the record)
-- Returns {outcome, state, queue, jobsCancelled}: outcome 'cancelled' (state: what the job was —
-- ready, delayed, active, fannedOut, joined), 'finished' (state: completed, dead, cancelled…;
-- nothing changed) or 'notFound'.
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

local jobPrefix, now, retention = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local base = pipelineBase(jobPrefix)
-- Where an unfinished job waits, by state.
local SETS = {ready = 'ready', delayed = 'delayed', active = 'inflight'}
local CANCELLED = '{"name":"CancelledError","message":"cancelled"}'
local MAX_DEPTH = 8

local function markCancelled(jk, id, queue, was, token)
  redis.call('HSET', jk, 'state', 'cancelled', 'token', '', 'cancelledAt', now, 'finishedAt', now)
  if retention > 0 then redis.call('EXPIRE', jk, retention) end
  local fields = {'type', 'cancelled', 'id', id, 'queue', queue, 'at', now, 'was', was}
  if token and token ~= '' then
    fields[#fields + 1] = 'token'
    fields[#fields + 1] = token
  end
  record(KEYS[1], KEYS[2], fields)
end

local cancelTree
-- Returns how many jobs this cancelled (0: finished or missing), the job's state and queue.
local function cancelOne(id, depth)
  local jk = jobKey(jobPrefix, id)
  local f = redis.pcall('HMGET', jk, 'state', 'queue', 'parent', 'token')
  if f.err or not f[1] then return 0, nil, nil end
  local state, queue = f[1], f[2] or ''
  local set = SETS[state]
  if set then
    local q = queueKeyPrefix(base, queue)
    redis.call('ZREM', q .. set, id)
    redis.call('HINCRBY', q .. 'counts', 'cancelled', 1)
    markCancelled(jk, id, queue, state, state == 'active' and f[4] or nil)
    -- A fan-out child cancelled on its own: the join still runs, with this child's outcome.
    if f[3] and f[3] ~= '' then
      finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"error":' .. CANCELLED .. '}', now, f[3])
    end
    return 1, state, queue
  end
  if (state == 'fannedOut' or state == 'joined') and depth < MAX_DEPTH then
    return cancelTree(jk, id, queue, state, depth), state, queue
  end
  return 0, state, queue
end

-- A fan-out parent: no join, and its unfinished children (and join) cancelled.
cancelTree = function(jk, parent, queue, state, depth)
  local fk = base .. 'fanin:' .. parent
  local total = tonumber(redis.call('HGET', fk, 'total'))
  redis.call('DEL', fk)
  local n = 0
  for i = 1, total or 0 do n = n + (cancelOne(parent .. ':' .. i, depth + 1)) end
  n = n + (cancelOne(parent .. ':join', depth + 1))
  if total or n > 0 then markCancelled(jk, parent, queue, state, nil) end
  return n
end

local n, state, queue = cancelOne(ARGV[2], 0)
if state == nil then return {'notFound', '', '', 0} end
if n > 0 or state == 'fannedOut' and redis.call('HGET', jobKey(jobPrefix, ARGV[2]), 'state') == 'cancelled' then
  return {'cancelled', state, queue, n}
end
return {'finished', state, queue, 0}
