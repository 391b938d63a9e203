-- Claim up to `count` ready jobs for one worker: promote due delayed jobs, pop by priority,
-- and write each lease (deadline + fencing token) in the same step, so a job is never
-- popped without an owner.
-- KEYS: 1 ready, 2 delayed, 3 inflight, 4 dead, 5 counts, 6 fence, 7 wake, 8 outbox, 9 meta
-- ARGV: 1 jobPrefix, 2 queue, 3 now (ms), 4 leaseMs, 5 count, 6 workerId
-- Returns {jobs, nextDueMs}; jobs is a flat list of 9 fields per job:
--   id, token, data, attempt, attempts, timeoutMs, stalls, createdAt, contentHash
local jobPrefix, queue = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
local leaseMs = tonumber(ARGV[4])
local count = tonumber(ARGV[5])
local workerId = ARGV[6]

promoteDue(jobPrefix, queue, KEYS[1], KEYS[2], KEYS[4], KEYS[5], now)

local jobs = {}
local popped = redis.call('ZPOPMIN', KEYS[1], count)
for i = 1, #popped, 2 do
  local id = popped[i]
  local jk = jobKey(jobPrefix, id)
  local f = redis.call('HMGET', jk, 'data', 'attemptsMade', 'attempts', 'timeout', 'stalls', 'createdAt', 'contentHash')
  if not f[1] then
    deadLetterRaw(jk, id, KEYS[4], KEYS[5], now, 'malformed: job record missing or has no data', queue)
    record(KEYS[8], KEYS[9], {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'error', '{"message":"malformed: job record missing or has no data"}'})
  else
    local token = redis.call('INCR', KEYS[6])
    local attempt = (tonumber(f[2]) or 0) + 1
    redis.call('HSET', jk, 'state', 'active', 'token', token, 'worker', workerId, 'startedAt', now)
    redis.call('ZADD', KEYS[3], now + leaseMs, id)
    redis.call('HINCRBY', KEYS[5], 'started', 1)
    record(KEYS[8], KEYS[9], {'type', 'started', 'id', id, 'queue', queue, 'at', now, 'token', token, 'attempt', attempt, 'worker', workerId})
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
  end
end

-- Chain the wake-up: if work remains, the next blocked consumer should look too.
if redis.call('ZCARD', KEYS[1]) > 0 then wake(KEYS[7]) end

local nextDue = -1
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] then nextDue = tonumber(first[2]) end
return {jobs, nextDue}
