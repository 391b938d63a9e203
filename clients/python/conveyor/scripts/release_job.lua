-- Hand a running job back for immediate redelivery without counting an attempt; the job keeps
-- its place in line. Used at the warm-shutdown drain deadline (counted as `handedBack`) and
-- when a handler's dependency is down (counted as `deferred`: the circuit breaker).
-- KEYS: 1 inflight, 2 ready, 3 counts, 4 wake, 5 outbox, 6 meta
-- ARGV: 1 jobPrefix, 2 queue, 3 id, 4 token, 5 now (ms), 6 reason, 7 counter ('handedBack' | 'deferred')
-- Returns 1, or 0 when the lease was lost (-1 when the job was cancelled).
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

local jobPrefix, queue, id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = tonumber(ARGV[5])
local jk = jobKey(jobPrefix, id)
local problem = leaseProblem(jk, token)
if problem == 'cancelled' then return -1 end
if problem then return 0 end
local score = requeueScore(jobPrefix, jk)
redis.call('ZREM', KEYS[1], id)
if ARGV[7] == 'handedBack' then redis.call('HINCRBY', jk, 'handbacks', 1) end
redis.call('HSET', jk, 'state', 'ready', 'token', '', 'requeued', ARGV[7] .. ': ' .. ARGV[6])
redis.call('ZADD', KEYS[2], score, id)
redis.call('HINCRBY', KEYS[3], ARGV[7], 1)
record(KEYS[5], KEYS[6], {'type', ARGV[7], 'id', id, 'queue', queue, 'at', now, 'token', token, 'reason', ARGV[6]})
wake(KEYS[4])
return 1
