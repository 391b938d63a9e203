-- A running handler reports progress: stored on the job and appended to its queue's events.
-- KEYS: 1 outbox, 2 meta
-- ARGV: 1 jobPrefix, 2 queue, 3 id, 4 token, 5 now (ms), 6 fraction (0..1), 7 message
-- Returns 1, or 0 when the lease was lost.
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

local jobPrefix, queue, id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local jk = jobKey(jobPrefix, id)
if not holdsLease(jk, token) then return 0 end
redis.call('HSET', jk, 'progress', ARGV[6], 'progressMessage', ARGV[7], 'progressAt', ARGV[5])
record(KEYS[1], KEYS[2], {'type', 'progress', 'id', id, 'queue', queue, 'at', ARGV[5], 'token', token, 'progress', ARGV[6], 'message', ARGV[7]})
return 1
