-- The leaderless sweeper: any worker or the operator may call it; a short mutex makes the
-- extra calls no-ops. Jobs whose lease expired go back to ready as a stall (not a failed
-- attempt); a job that stalls more than maxStalls is dead-lettered (poison-pill guard).
-- Also promotes due delayed jobs and forgets workers that stopped reporting.
-- KEYS: 1 inflight, 2 ready, 3 dead, 4 counts, 5 wake, 6 outbox, 7 meta, 8 sweepLock,
--       9 delayed, 10 workers
-- ARGV: 1 jobPrefix, 2 queue, 3 now (ms), 4 maxStalls, 5 limit, 6 lockMs, 7 workerStaleMs
-- Returns {requeued, deadLettered}, or {-1, -1} when another sweeper holds the mutex.
local jobPrefix, queue = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
local maxStalls = tonumber(ARGV[4])
if not redis.call('SET', KEYS[8], '1', 'NX', 'PX', ARGV[6]) then return {-1, -1} end

promoteDue(jobPrefix, queue, KEYS[2], KEYS[9], KEYS[3], KEYS[4], now)

local requeued, dead = 0, 0
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
for _, id in ipairs(expired) do
  local jk = jobKey(jobPrefix, id)
  redis.call('ZREM', KEYS[1], id)
  local token = redis.call('HGET', jk, 'token') or ''
  local stalls = redis.call('HINCRBY', jk, 'stalls', 1)
  redis.call('HINCRBY', KEYS[4], 'stalled', 1)
  local score = redis.call('HGET', jk, 'score')
  if stalls > maxStalls or not score then
    local reason = 'stalled ' .. stalls .. ' times: lease expired while running (poison-pill guard)'
    redis.call('HSET', jk, 'state', 'dead', 'deadReason', reason, 'finishedAt', now, 'token', '')
    redis.call('ZADD', KEYS[3], now, id)
    redis.call('HINCRBY', KEYS[4], 'dead', 1)
    finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"error":' .. cjson.encode(reason) .. '}', now)
    record(KEYS[6], KEYS[7], {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'token', token, 'reason', reason})
    dead = dead + 1
  else
    redis.call('HSET', jk, 'state', 'ready', 'token', '')
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
return {requeued, dead}
