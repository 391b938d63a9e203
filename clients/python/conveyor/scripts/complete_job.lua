-- Complete a job the caller holds the lease for; keep its record for `retentionSeconds`.
-- (The worker settles through settle_jobs.lua, which does the same for a batch; this one-job
-- form stays for other clients.)
-- KEYS: 1 inflight, 2 counts, 3 outbox, 4 meta
-- ARGV: 1 jobPrefix, 2 queue, 3 id, 4 token, 5 now (ms), 6 result (JSON), 7 retentionSeconds,
--       8 contentHash ('' = none), 9 resultTtlSeconds, 10 reused ('1' when the result came from the cache)
-- Returns 1, or 0 when the lease was lost (the result is discarded: fencing), or -1 when the
-- job was cancelled meanwhile (the result is refused; not counted as fenced).
-- Complete-and-claim (optional): ARGV 11 count, 12 leaseMs, 13 workerId: also claims up to
-- `count` jobs of this queue for the freed slot(s) and returns {1|0, jobs, nextDueMs} as
-- claim_jobs does (see includes/settleAndClaim.lua).
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

-- Result reuse: a stage's result stored under the job's content hash, so a repeated input
-- (the same document) skips the stage. `jobPrefix` is `cvy:{pipeline}:job:`.
local function rememberResult(jobPrefix, queue, contentHash, ttl, result)
  if contentHash ~= '' and tonumber(ttl) > 0 then
    redis.call('SET', pipelineBase(jobPrefix) .. 'result:' .. queue .. ':' .. contentHash, result, 'EX', ttl)
  end
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

-- The score for putting a running job back into a ready set (release_job, advance_job), read
-- before the script changes anything. claim_jobs made sure the record had a numeric one; a
-- record changed while its job ran gets a fresh place behind the jobs of its priority.
local function requeueScore(jobPrefix, jk)
  local f = redis.call('HMGET', jk, 'score', 'priority')
  local score = numericScore(f[1])
  if score then return score end
  local p = numericScore(f[2]) or 0
  if p < 0 or p > 1000 then p = 0 end
  score = (1000 - math.floor(p)) * 4398046511104 + redis.call('INCR', pipelineBase(jobPrefix) .. 'seq')
  redis.call('HSET', jk, 'score', score)
  return score
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

-- Settling finished jobs (complete_job, advance_job, settle_jobs): the per-job part — the
-- fencing check, the record, fan-in, the transition's event — runs for each job; what only
-- counts or indexes (the in-flight removal, the counters, the next stage's wake) is collected
-- in a tally and written once per script call by flushSettled: one ZREM and one HINCRBY per
-- counter for a batch instead of per job. flushSettled runs before any claim in the same call,
-- so a job handed to its own queue can be claimed again without losing its new lease.
local function newSettleTally()
  return {done = {}, completed = 0, fenced = 0, reused = 0, enqueued = 0}
end
local function flushSettled(tally, inflightKey, countsKey, nextCountsKey, nextWakeKey)
  if #tally.done > 0 then redis.call('ZREM', inflightKey, unpack(tally.done)) end
  for _, c in ipairs({'completed', 'fenced', 'reused'}) do
    if tally[c] > 0 then redis.call('HINCRBY', countsKey, c, tally[c]) end
  end
  if tally.enqueued > 0 then
    redis.call('HINCRBY', nextCountsKey, 'enqueued', tally.enqueued)
    wake(nextWakeKey)
  end
end

-- Complete one job the caller holds the lease for; keep its record for `retention` seconds
-- (0: delete it). Returns 1, 0 when the lease was lost (the result is discarded: fencing), or
-- -1 when the job was cancelled meanwhile (the result is refused; not counted as fenced).
local function completeJob(tally, outboxKey, metaKey, jobPrefix, queue, now, retention, id, token, result, contentHash, resultTtl, reused)
  local jk = jobKey(jobPrefix, id)
  local held = redis.call('HMGET', jk, 'token', 'parent', 'state', 'trace')
  if not leaseHeld(held[1], token) then
    if held[3] == 'cancelled' then return -1 end
    tally.fenced = tally.fenced + 1
    return 0
  end
  tally.done[#tally.done + 1] = id
  if retention > 0 then
    redis.call('HSET', jk, 'state', 'completed', 'result', result, 'finishedAt', now, 'token', '')
    redis.call('EXPIRE', jk, retention)
  else
    redis.call('DEL', jk)
  end
  -- (only a fan-out child has a parent: the outcome text is built for those alone)
  if held[2] and held[2] ~= '' then
    finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"result":' .. result .. '}', now, held[2], held[4])
  end
  tally.completed = tally.completed + 1
  if reused == '1' then tally.reused = tally.reused + 1 else rememberResult(jobPrefix, queue, contentHash, resultTtl, result) end
  record(outboxKey, metaKey, {'type', 'completed', 'id', id, 'queue', queue, 'at', now, 'token', token, 'result', result, 'reused', reused})
  return 1
end

-- Complete stage `queue` and enqueue the same job (same id) into `nextQueue` in one step, so a
-- crash between the two cannot lose or duplicate the hand-over. A new stage starts with fresh
-- attempt, stall and timeout budgets (timeout 0 = stage default); `nextTrace` '' keeps the
-- job's own trace context. Returns 1, 0 (fenced) or -1 (cancelled), as completeJob.
local function advanceJob(tally, outboxKey, metaKey, nextReadyKey, jobPrefix, queue, now, id, token, result, contentHash, resultTtl, reused, nextQueue, nextData, nextContentHash, nextTrace)
  local jk = jobKey(jobPrefix, id)
  local problem = leaseProblem(jk, token)
  if problem == 'cancelled' then return -1 end
  if problem then
    tally.fenced = tally.fenced + 1
    return 0
  end
  local score = requeueScore(jobPrefix, jk)
  tally.done[#tally.done + 1] = id
  tally.completed = tally.completed + 1
  if reused == '1' then tally.reused = tally.reused + 1 else rememberResult(jobPrefix, queue, contentHash, resultTtl, result) end
  record(outboxKey, metaKey, {'type', 'completed', 'id', id, 'queue', queue, 'at', now, 'token', token, 'result', result, 'next', nextQueue, 'reused', reused})
  local fields = {'queue', nextQueue, 'data', nextData, 'state', 'ready', 'token', '',
    'attemptsMade', 0, 'stalls', 0, 'handbacks', 0, 'timeout', 0, 'createdAt', now,
    'prevQueue', queue, 'errors', '', 'contentHash', nextContentHash, 'progress', '', 'progressMessage', '', 'requeued', ''}
  if nextTrace ~= '' then
    fields[#fields + 1] = 'trace'
    fields[#fields + 1] = nextTrace
  end
  redis.call('HSET', jk, unpack(fields))
  redis.call('ZADD', nextReadyKey, score, id)
  tally.enqueued = tally.enqueued + 1
  record(outboxKey, metaKey, {'type', 'enqueued', 'id', id, 'queue', nextQueue, 'at', now, 'from', queue, 'data', nextData})
  return 1
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

-- What a claim needs from a job record, checked before the claim changes it: the HMGET
-- fields, or nil and the dead-letter reason (no hash, no data, no numeric score). Counters the
-- other scripts HINCRBY (attemptsMade, stalls, handbacks) are reset to 0 when they are not
-- integers, and a score in an odd form (' 1', '0x10', '1e3') is stored as a plain number, so
-- every later script can use the record as it is. Non-numeric attempts/timeout/createdAt come
-- back as nil: the caller's defaults.
local CLAIM_FIELDS = {'data', 'attemptsMade', 'attempts', 'timeout', 'stalls', 'createdAt', 'contentHash', 'score', 'handbacks', 'trace', 'requeued'}
local CLAIM_COUNTERS = {2, 5, 9} -- attemptsMade, stalls, handbacks
local CLAIM_NUMBERS = {3, 4, 6}  -- attempts, timeout, createdAt
local function claimable(jk, id)
  local f = redis.pcall('HMGET', jk, unpack(CLAIM_FIELDS))
  if f.err then return nil, notAHash(jk, id) or ('malformed: ' .. f.err) end
  if not f[1] then return nil, 'malformed: job record missing or has no data' end
  local score = numericScore(f[8])
  if not score then
    return nil, 'malformed: job record has no numeric score (' .. (f[8] and cjson.encode(string.sub(f[8], 1, 40)) or 'none') .. ')'
  end
  -- (plain loops, no table unless something needs fixing: this runs for every claimed job)
  local fix
  if not string.match(f[8], '^%-?%d+$') and not string.match(f[8], '^%-?%d+%.%d+$') then fix = {'score', score} end
  for k = 1, 3 do
    local i = CLAIM_COUNTERS[k]
    if f[i] and not isCounter(f[i]) then
      fix = fix or {}
      fix[#fix + 1] = CLAIM_FIELDS[i]
      fix[#fix + 1] = 0
      f[i] = '0'
    end
  end
  if fix then redis.call('HSET', jk, unpack(fix)) end
  for k = 1, 3 do
    local i = CLAIM_NUMBERS[k]
    if not numericScore(f[i]) then f[i] = nil end
  end
  return f
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

-- Queue control: pause and a global rate limit, per queue, kept in the pipeline's meta hash —
-- `paused:<queue>` ('1'), `rate:<queue>` ('<max>/<windowMs>') and `rlog:<queue>` (the claims of
-- the current window) — so a claim reads them in the HMGET that also reads the outbox flag
-- record() needs for its first transition anyway (readMeta in record.lua): a claim that starts
-- jobs, or follows a completion, pays nothing for it,
-- a claim that pops nothing never reads them, and a rate-limited claim adds one HSET.
local function readControl(metaKey, queue)
  local f = metaFields[metaKey .. ' ' .. queue] or readMeta(metaKey, queue)
  return f[2] == '1', f[3], f[4]
end

-- A sliding-window log: `rlog` is 'time:jobs,time:jobs,…', one entry per claim still inside the
-- window, so no window of `windowMs` ever holds more than `max` starts (a burst of `max` is
-- allowed, never more). The window's clock only moves forward: a claim whose `now` (the
-- caller's clock, taken before its call reached Redis) is older than the log's newest entry counts
-- as made at that entry's time — otherwise claims arriving out of order could each fit their own
-- window and together overfill a later one. Returns how many of `wanted` jobs may start now, the
-- entries kept, (when fewer than wanted may start) when the oldest entry leaves the window — the
-- next chance — and the claim's time on that clock.
local function rateAllowance(rate, rlog, now, wanted)
  local max, window = string.match(rate, '^(%d+)/(%d+)$')
  max, window = tonumber(max), tonumber(window)
  if not max or not window or window <= 0 then return wanted, {}, nil, now end
  for t in string.gmatch(rlog or '', '(%d+):%d+') do
    t = tonumber(t)
    if t > now then now = t end
  end
  local kept, used, oldest = {}, 0, nil
  for t, n in string.gmatch(rlog or '', '(%d+):(%d+)') do
    t = tonumber(t)
    if t > now - window then
      kept[#kept + 1] = t .. ':' .. n
      used = used + tonumber(n)
      if not oldest or t < oldest then oldest = t end
    end
  end
  local allowed = math.max(0, math.min(wanted, max - used))
  local freeAt = nil
  if allowed < wanted then freeAt = (oldest or now) + window end
  return allowed, kept, freeAt, now
end

-- The claim (claim_jobs.lua, and the complete-and-claim option of complete_job/advance_job):
-- promote due delayed jobs, pop up to `count` ready jobs by priority and write each lease
-- (deadline + fencing token) in the same step, so a job is never popped without an owner.
-- `keys` are claim_jobs' KEYS: 1 ready, 2 delayed, 3 inflight, 4 dead, 5 counts, 6 fence,
-- 7 wake, 8 outbox, 9 meta. Returns {jobs, nextDueMs}; jobs is a flat list of 11 fields per job:
--   id, token, data, attempt, attempts, timeoutMs, stalls, createdAt, contentHash, trace, requeued
-- (trace: the W3C context the job was created in; requeued: why it last went back to ready)
local function claimJobs(keys, jobPrefix, queue, now, leaseMs, count, workerId)
  local nextDue = promoteDue(jobPrefix, queue, keys[1], keys[2], keys[4], keys[5], now)

  local jobs = {}
  local popped = redis.call('ZPOPMIN', keys[1], count)
  -- Pause and rate limit (see control.lua): what may not start goes back with its own score.
  local gated, freeAt, rate, kept = false, nil, nil, nil
  -- Jobs started by this claim (the rate limit's log counts them; the reply's field count may grow).
  local started = 0
  if #popped > 0 then
    local paused, rlog
    paused, rate, rlog = readControl(keys[9], queue)
    local allowed = #popped / 2
    if paused then
      allowed = 0
    elseif rate then
      -- (`now` moves to the window's clock: the starts are recorded at the time the limit counted them)
      allowed, kept, freeAt, now = rateAllowance(rate, rlog, now, allowed)
    end
    if allowed < #popped / 2 then
      gated = true
      local back = {}
      for i = 2 * allowed + 1, #popped, 2 do
        back[#back + 1] = popped[i + 1]
        back[#back + 1] = popped[i]
        popped[i], popped[i + 1] = nil, nil
      end
      redis.call('ZADD', keys[1], unpack(back))
    end
  end
  -- Checked before anything changes: a Lua error here would leave the rest of the batch in no set.
  local ok = {}
  for i = 1, #popped, 2 do
    local id = popped[i]
    local jk = jobKey(jobPrefix, id)
    local f, reason = claimable(jk, id)
    if not f then
      deadLetterRaw(jk, id, keys[4], keys[5], now, reason, queue, popped[i + 1])
      record(keys[8], keys[9], {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'reason', reason, 'error', cjson.encode({message = reason})})
    else
      ok[#ok + 1] = id
      ok[#ok + 1] = f
    end
  end
  started = #ok / 2
  if started > 0 then
    -- Per claim, not per job: one INCRBY reserves the fencing tokens (top - started + 1 … top),
    -- one ZADD writes the lease deadlines, one HINCRBY counts the starts.
    local top = redis.call('INCRBY', keys[6], started)
    local deadlines = {}
    for k = 1, started do
      local id, f = ok[2 * k - 1], ok[2 * k]
      local token = top - started + k
      local attempt = (tonumber(f[2]) or 0) + 1
      redis.call('HSET', jobKey(jobPrefix, id), 'state', 'active', 'token', token, 'worker', workerId, 'startedAt', now)
      record(keys[8], keys[9], {'type', 'started', 'id', id, 'queue', queue, 'at', now, 'token', token, 'attempt', attempt, 'worker', workerId})
      deadlines[2 * k - 1] = now + leaseMs
      deadlines[2 * k] = id
      local j = #jobs
      jobs[j + 1] = id
      jobs[j + 2] = token
      jobs[j + 3] = f[1]
      jobs[j + 4] = attempt
      jobs[j + 5] = f[3] or '1'
      jobs[j + 6] = f[4] or '0'
      jobs[j + 7] = f[5] or '0'
      jobs[j + 8] = f[6] or '0'
      jobs[j + 9] = f[7] or ''
      jobs[j + 10] = f[10] or ''
      jobs[j + 11] = f[11] or ''
    end
    redis.call('ZADD', keys[3], unpack(deadlines))
    redis.call('HINCRBY', keys[5], 'started', started)
  end

  -- The window's log gains this claim's starts (one HSET, only on a rate-limited queue).
  if rate and started > 0 then
    kept = kept or {}
    kept[#kept + 1] = now .. ':' .. started
    redis.call('HSET', keys[9], 'rlog:' .. queue, table.concat(kept, ','))
  end

  -- Chain the wake-up: if work may remain (the pop was not cut short), the next blocked
  -- consumer should look too. (A queue emptied by exactly this pop costs one idle look.)
  if #popped == 2 * count and not gated then wake(keys[7]) end

  if nextDue == nil then
    local first = redis.call('ZRANGE', keys[2], 0, 0, 'WITHSCORES')
    nextDue = first[2] and tonumber(first[2]) or -1
  end
  -- Rate-limited: come back when the window has room (or earlier, when a delayed job is due).
  if freeAt and (nextDue < 0 or freeAt < nextDue) then nextDue = freeAt end
  return {jobs, nextDue}
end

-- Complete-and-claim (like BullMQ's moveToFinished fetching the next job): a script that
-- settles jobs may also claim for the slots it frees, saving the consumer a round trip. The
-- claim is from `queue` (the consumer's own), whose keys are named here from `jobPrefix` — the
-- pipeline's hash tag, so the same slot as the declared KEYS — rather than sent with every call.
-- The claim runs whether or not a settle was fenced: the slot is free either way.
-- Returns claim_jobs' reply, {jobs, nextDueMs}.
local function claimForSlots(jobPrefix, queue, now, count, leaseMs, workerId)
  if count <= 0 then return {{}, -1} end
  local base = pipelineBase(jobPrefix)
  local q = queueKeyPrefix(base, queue)
  -- claim_jobs' KEYS, in its order
  local keys = {q .. 'ready', q .. 'delayed', q .. 'inflight', q .. 'dead', q .. 'counts', base .. 'fence', q .. 'wake', base .. 'outbox', base .. 'meta'}
  return claimJobs(keys, jobPrefix, queue, now, leaseMs, count, workerId)
end

-- The one-job scripts' form: the caller appends `count leaseMs workerId` after the script's own
-- `nArgs` arguments. Without them the script returns `settled` as before; with them
-- {settled, jobs, nextDueMs}.
local function settleAndClaim(argv, settled, nArgs, jobPrefix, queue, now)
  local count = tonumber(argv[nArgs + 1] or '')
  if count == nil then return settled end
  local claimed = claimForSlots(jobPrefix, queue, now, count, tonumber(argv[nArgs + 2]), argv[nArgs + 3])
  return {settled, claimed[1], claimed[2]}
end

local jobPrefix, queue = ARGV[1], ARGV[2]
local now = tonumber(ARGV[5])
local tally = newSettleTally()
local settled = completeJob(tally, KEYS[3], KEYS[4], jobPrefix, queue, now, tonumber(ARGV[7]), ARGV[3], ARGV[4], ARGV[6], ARGV[8], ARGV[9], ARGV[10])
flushSettled(tally, KEYS[1], KEYS[2])
return settleAndClaim(ARGV, settled, 10, jobPrefix, queue, now)
