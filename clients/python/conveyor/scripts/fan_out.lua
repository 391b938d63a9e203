-- Complete a job by fanning it out: its children (one per element of the handler's result) are
-- enqueued into the next stage, and a fan-in record waits for all of them; the child that
-- finishes last enqueues the join job (see finishChild in includes/fanIn.lua). One atomic step, all
-- keys in the pipeline's slot.
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta, 5 nextReady, 6 nextCounts, 7 nextWake, 8 seq
-- ARGV: 1 jobPrefix, 2 queue, 3 id, 4 token, 5 now (ms), 6 nextQueue, 7 joinQueue,
--       8 retentionSeconds, 9 joinTrace (the W3C trace context the join is created in; '' = the
--       job's own), 10 traced (0, or the number of children: then a trace context per child
--       follows the children's data), then one child data (JSON) per child [, one trace per child]
-- Returns the number of children, or -1 when the lease was lost (-2 when the job was cancelled).
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
-- The fencing check: only the holder of the current lease token may act on a job.
local function leaseHeld(current, token)
  return current ~= false and current ~= '' and current == token
end
local function holdsLease(jk, token)
  return leaseHeld(redis.call('HGET', jk, 'token'), token)
end

-- Why a caller does not hold the lease: nil when it does; 'cancelled' when the job was
-- cancelled (its late result is refused, not counted as fenced); 'lost' otherwise. The same one
-- command as holdsLease.
local function leaseProblem(jk, token)
  local f = redis.call('HMGET', jk, 'token', 'state')
  if leaseHeld(f[1], token) then return nil end
  if f[2] == 'cancelled' then return 'cancelled' end
  return 'lost'
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

local jobPrefix, queue, id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = tonumber(ARGV[5])
local nextQueue, joinQueue = ARGV[6], ARGV[7]
local jk = jobKey(jobPrefix, id)
local problem = leaseProblem(jk, token)
if problem == 'cancelled' then return -2 end
if problem then
  redis.call('HINCRBY', KEYS[2], 'fenced', 1)
  return -1
end
local f = redis.call('HMGET', jk, 'priority', 'attempts', 'trace')
local priority = tonumber(f[1]) or 0
local attempts = f[2] or '3'
local traced = tonumber(ARGV[10]) or 0
local n = traced > 0 and traced or #ARGV - 10
local ownTrace = f[3] or ''
local joinTrace = ARGV[9] ~= '' and ARGV[9] or ownTrace
redis.call('ZREM', KEYS[1], id)
redis.call('HINCRBY', KEYS[2], 'completed', 1)
redis.call('HSET', jk, 'state', 'fannedOut', 'result', '{"children":' .. n .. '}', 'finishedAt', now, 'token', '', 'children', n)
record(KEYS[3], KEYS[4], {'type', 'completed', 'id', id, 'queue', queue, 'at', now, 'token', token, 'result', '{"children":' .. n .. '}', 'next', nextQueue})
local base = pipelineBase(jobPrefix)
redis.call('HSET', base .. 'fanin:' .. id, 'total', n, 'done', 0, 'join', joinQueue, 'priority', priority, 'attempts', attempts, 'createdAt', now, 'trace', joinTrace)
for i = 1, n do
  local childId = id .. ':' .. i
  local seq = redis.call('INCR', KEYS[8])
  local score = (1000 - priority) * 4398046511104 + seq
  local childTrace = traced > 0 and ARGV[10 + n + i] or ownTrace
  redis.call('HSET', jobKey(jobPrefix, childId), 'id', childId, 'queue', nextQueue, 'data', ARGV[10 + i], 'priority', priority,
    'score', score, 'attempts', attempts, 'attemptsMade', 0, 'stalls', 0, 'handbacks', 0, 'timeout', 0, 'createdAt', now,
    'state', 'ready', 'parent', id, 'trace', childTrace)
  redis.call('ZADD', KEYS[5], score, childId)
  record(KEYS[3], KEYS[4], {'type', 'enqueued', 'id', childId, 'queue', nextQueue, 'at', now, 'from', id, 'attempts', attempts, 'data', ARGV[10 + i]})
end
redis.call('HINCRBY', KEYS[6], 'enqueued', n)
if n > 0 then wake(KEYS[7]) else enqueueJoin(jobPrefix, id, now) end
return n
