-- Enqueue one or more jobs atomically (ready, or delayed when they have a delay).
-- KEYS: 1 ready, 2 delayed, 3 counts, 4 wake, 5 outbox, 6 meta, 7 seq
-- ARGV: 1 jobPrefix, 2 idempotencyPrefix, 3 queue, 4 now (ms), 5 maxPayloadBytes,
--       6 idempotencyTtlSeconds, then per job 8 fields:
--       id, data, priority, delayMs, attempts, timeoutMs, idempotencyKey ('' = none), contentHash
-- Returns a flat list: id, created (1) or duplicate (0), per job.
--- @include "includes/keys"
--- @include "includes/record"
--- @include "includes/wake"

local jobPrefix, idemPrefix, queue = ARGV[1], ARGV[2], ARGV[3]
local now = tonumber(ARGV[4])
local maxBytes = tonumber(ARGV[5])
local idemTtl = tonumber(ARGV[6])
local FIELDS = 8
local out = {}
local woke = false
for i = 7, #ARGV, FIELDS do
  local id, data = ARGV[i], ARGV[i + 1]
  local priority = tonumber(ARGV[i + 2])
  local delay = tonumber(ARGV[i + 3])
  local attempts, timeout = ARGV[i + 4], ARGV[i + 5]
  local idemKey, contentHash = ARGV[i + 6], ARGV[i + 7]
  if #data > maxBytes then
    return redis.error_reply('ERR_PAYLOAD_TOO_LARGE job ' .. id .. ' is ' .. #data .. ' bytes, limit ' .. maxBytes)
  end
  local existing = false
  if idemKey ~= '' then
    existing = redis.call('GET', idemPrefix .. idemKey)
  end
  local jk = jobKey(jobPrefix, id)
  if not existing and redis.call('EXISTS', jk) == 1 then existing = id end
  if existing then
    out[#out + 1] = existing
    out[#out + 1] = 0
  else
    if idemKey ~= '' then redis.call('SET', idemPrefix .. idemKey, id, 'EX', idemTtl) end
    -- Higher priority sorts first; a sequence keeps FIFO order within one priority.
    local seq = redis.call('INCR', KEYS[7])
    local score = (1000 - priority) * 4398046511104 + seq
    redis.call('HSET', jk, 'id', id, 'queue', queue, 'data', data, 'priority', priority,
      'score', score, 'attempts', attempts, 'attemptsMade', 0, 'stalls', 0, 'handbacks', 0,
      'timeout', timeout, 'createdAt', now, 'idempotencyKey', idemKey, 'contentHash', contentHash,
      'state', delay > 0 and 'delayed' or 'ready')
    if delay > 0 then
      redis.call('ZADD', KEYS[2], now + delay, id)
    else
      redis.call('ZADD', KEYS[1], score, id)
      woke = true
    end
    redis.call('HINCRBY', KEYS[3], 'enqueued', 1)
    local fields = {'type', 'enqueued', 'id', id, 'queue', queue, 'at', now, 'attempts', attempts}
    if delay > 0 then
      fields[#fields + 1] = 'due'
      fields[#fields + 1] = now + delay
    end
    fields[#fields + 1] = 'data' -- last: see record()
    fields[#fields + 1] = data
    record(KEYS[5], KEYS[6], fields)
    out[#out + 1] = id
    out[#out + 1] = 1
  end
end
if woke then wake(KEYS[4]) end
return out
