-- Claim up to `count` ready jobs for one worker: promote due delayed jobs, pop by priority,
-- and write each lease (deadline + fencing token) in the same step, so a job is never
-- popped without an owner. The claim itself is `claimJobs` in includes/claimJobs.lua, shared with the
-- complete-and-claim option of complete_job.lua and advance_job.lua.
-- KEYS: 1 ready, 2 delayed, 3 inflight, 4 dead, 5 counts, 6 fence, 7 wake, 8 outbox, 9 meta
-- ARGV: 1 jobPrefix, 2 queue, 3 now (ms), 4 leaseMs, 5 count, 6 workerId
-- Returns {jobs, nextDueMs}; jobs is a flat list of 9 fields per job:
--   id, token, data, attempt, attempts, timeoutMs, stalls, createdAt, contentHash
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
-- Wake one blocked consumer; it re-wakes the next if work remains (see claim_jobs.lua).
local function wake(wakeKey)
  if redis.call('LLEN', wakeKey) == 0 then redis.call('LPUSH', wakeKey, '1') end
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

return claimJobs(KEYS, ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6])
