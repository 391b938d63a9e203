-- Run a delayed job now: it leaves the delayed set for ready with its own priority score (the
-- one enqueue gave it, so it keeps its place among jobs of its priority), and a `promoted`
-- event is recorded like an enqueue's. A job that is not delayed is left as it is.
-- KEYS: 1 delayed, 2 ready, 3 wake, 4 outbox, 5 meta
-- ARGV: 1 jobPrefix, 2 id, 3 queue, 4 now (ms)
-- Returns {outcome, state}: 'promoted' (state 'delayed'), 'notDelayed' (state: what the job is;
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

local id, queue, now = ARGV[2], ARGV[3], tonumber(ARGV[4])
local jk = jobKey(ARGV[1], id)
local f = redis.pcall('HMGET', jk, 'state', 'score')
if f.err or not f[1] then return {'notFound', ''} end
local score = f[2] and numericScore(f[2])
-- Only a job waiting in this queue's delayed set moves; a malformed score stays for promoteDue to dead-letter.
if f[1] ~= 'delayed' or not score or not redis.call('ZSCORE', KEYS[1], id) then return {'notDelayed', f[1]} end
redis.call('ZREM', KEYS[1], id)
redis.call('HSET', jk, 'state', 'ready')
redis.call('ZADD', KEYS[2], score, id)
record(KEYS[4], KEYS[5], {'type', 'promoted', 'id', id, 'queue', queue, 'at', now})
wake(KEYS[3])
return {'promoted', 'delayed'}
