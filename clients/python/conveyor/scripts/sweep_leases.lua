-- The leaderless sweeper: any worker or the operator may call it; a short mutex makes the
-- extra calls no-ops. Jobs whose lease expired go back to ready as a stall (not a failed
-- attempt); a job that stalls more than maxStalls is dead-lettered (poison-pill guard).
-- Also promotes due delayed jobs and forgets workers that stopped reporting.
--
-- Outage grace. While Redis is unreachable (a restart, a failover, a partition of the whole
-- queue) no worker can renew a lease, so right after it every lease may look expired though
-- its worker is alive. The sweeper tells this apart by its own calls: every call (mutex held
-- or not) stamps `sweptAt` in the queue's `sweeper` hash with the Redis server's clock (one
-- clock, whatever the callers' skew). When a call finds the previous stamp older than `gapMs`,
-- nobody reached Redis for that long: a grace window of `graceMs` opens (`graceUntil`), during
-- which no lease is expired and no worker report is pruned, so every live worker renews
-- first. Due delayed jobs are still promoted. A dead worker's jobs wait at most one grace.
-- No stamp yet (a new queue, or one swept only by an older version): no grace.
--
-- KEYS: 1 inflight, 2 ready, 3 dead, 4 counts, 5 wake, 6 outbox, 7 meta, 8 sweepLock,
--       9 delayed, 10 workers, 11 sweeper
-- ARGV: 1 jobPrefix, 2 queue, 3 now (ms), 4 maxStalls, 5 limit, 6 lockMs, 7 workerStaleMs,
--       8 gapMs, 9 graceMs (8, 9: '' or 0 = the values last given by a caller that knew them,
--       kept in the sweeper hash; else 15000 and 33000, for the default 30 s lease)
-- Returns {requeued, deadLettered, graceLeftMs}; requeued = deadLettered = -1 when another
-- sweeper holds the mutex. graceLeftMs > 0 while a grace window is open (nothing expired).
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

-- Move delayed jobs whose time has come to ready (bounded per call). Returns the earliest
-- delayed job's due time (-1: none) when nothing was moved — the common case costs one
-- command, and the caller need not look again; nil when it must.
local function promoteDue(jobPrefix, queue, readyKey, delayedKey, deadKey, countsKey, now)
  local first = redis.call('ZRANGE', delayedKey, 0, 0, 'WITHSCORES')
  if not first[2] then return -1 end
  local firstDue = tonumber(first[2])
  if firstDue and firstDue > now then return firstDue end
  local due = redis.call('ZRANGEBYSCORE', delayedKey, '-inf', now, 'LIMIT', 0, 1000)
  for _, id in ipairs(due) do
    local jk = jobKey(jobPrefix, id)
    redis.call('ZREM', delayedKey, id)
    local score = redis.pcall('HGET', jk, 'score')
    score = type(score) == 'string' and numericScore(score)
    if score then
      redis.call('HSET', jk, 'state', 'ready')
      redis.call('ZADD', readyKey, score, id)
    else
      local reason = notAHash(jk, id) or 'malformed: job record missing or has no numeric score'
      deadLetterRaw(jk, id, deadKey, countsKey, now, reason, queue)
      local base = pipelineBase(jobPrefix)
      record(base .. 'outbox', base .. 'meta', {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'reason', reason})
    end
  end
  return nil
end

local jobPrefix, queue = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
local maxStalls = tonumber(ARGV[4])

-- Redis 7 replicates scripts by effects (TIME before writes is fine); 5 and 6 need asking.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local serverNow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[11], 'sweptAt', 'graceUntil', 'gapMs', 'graceMs')
local gapMs, graceMs = tonumber(ARGV[8]) or 0, tonumber(ARGV[9]) or 0
if gapMs > 0 and graceMs > 0 then
  if tonumber(s[3]) ~= gapMs or tonumber(s[4]) ~= graceMs then redis.call('HSET', KEYS[11], 'gapMs', gapMs, 'graceMs', graceMs) end
else
  gapMs, graceMs = tonumber(s[3]) or 15000, tonumber(s[4]) or 33000
end
local sweptAt, graceUntil = tonumber(s[1]), tonumber(s[2]) or 0
if sweptAt and serverNow - sweptAt > gapMs and serverNow + graceMs > graceUntil then
  graceUntil = serverNow + graceMs
  redis.call('HSET', KEYS[11], 'graceUntil', graceUntil, 'gapAt', serverNow, 'gapMsSeen', serverNow - sweptAt)
end
redis.call('HSET', KEYS[11], 'sweptAt', serverNow)
local graceLeft = math.max(0, graceUntil - serverNow)

if not redis.call('SET', KEYS[8], '1', 'NX', 'PX', ARGV[6]) then return {-1, -1, graceLeft} end

promoteDue(jobPrefix, queue, KEYS[2], KEYS[9], KEYS[3], KEYS[4], now)
if graceLeft > 0 then return {0, 0, graceLeft} end

local requeued, dead = 0, 0
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
for _, id in ipairs(expired) do
  local jk = jobKey(jobPrefix, id)
  redis.call('ZREM', KEYS[1], id)
  local token = redis.call('HGET', jk, 'token') or ''
  local stalls = redis.call('HINCRBY', jk, 'stalls', 1)
  redis.call('HINCRBY', KEYS[4], 'stalled', 1)
  -- A score that is missing or not a number must not reach ZADD (the error would abort the
  -- script half-way, with this job out of inflight and nowhere else); nor may nan or inf.
  local score = tonumber(redis.call('HGET', jk, 'score'))
  if score and (score ~= score or score == math.huge or score == -math.huge) then score = nil end
  if stalls > maxStalls or not score then
    local reason
    if not score then
      reason = 'malformed: job record missing or its score is not a number (lease expired)'
    else
      reason = 'stalled ' .. stalls .. ' times: lease expired while running (poison-pill guard)'
    end
    redis.call('HSET', jk, 'id', id, 'queue', queue, 'state', 'dead', 'deadReason', reason, 'finishedAt', now, 'token', '')
    redis.call('ZADD', KEYS[3], now, id)
    redis.call('HINCRBY', KEYS[4], 'dead', 1)
    finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"error":' .. cjson.encode(reason) .. '}', now)
    record(KEYS[6], KEYS[7], {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'token', token, 'reason', reason})
    dead = dead + 1
  else
    redis.call('HSET', jk, 'state', 'ready', 'token', '', 'requeued', 'stalled: lease expired (' .. stalls .. ')')
    redis.call('ZADD', KEYS[2], score, id)
    record(KEYS[6], KEYS[7], {'type', 'stalled', 'id', id, 'queue', queue, 'at', now, 'token', token, 'stalls', stalls})
    requeued = requeued + 1
  end
end
if requeued > 0 then wake(KEYS[5]) end

local workers = redis.call('HGETALL', KEYS[10])
local staleBefore = now - tonumber(ARGV[7])
for i = 1, #workers, 2 do
  local ok, info = pcall(cjson.decode, workers[i + 1])
  if not ok or type(info) ~= 'table' or (tonumber(info.seen) or 0) < staleBefore then
    redis.call('HDEL', KEYS[10], workers[i])
  end
end
return {requeued, dead, 0}
