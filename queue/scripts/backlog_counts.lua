-- The counts of one queue that scaling reads, in one atomic call. The operator pipelines one
-- call per pool, so polling every pool on a Redis server is one round trip per interval.
--
-- KEYS: 1 ready, 2 delayed, 3 inflight, 4 dead, 5 counts
-- ARGV: 1 now (ms), 2 jobPrefix
-- Returns {ready, delayed, dueDelayed, inflight, dead, completed, oldestReadyCreatedAt}; the
-- last is 0 when nothing is ready (or the head job has no createdAt).
local ready = redis.call('ZCARD', KEYS[1])
local delayed = redis.call('ZCARD', KEYS[2])
local due = 0
if delayed > 0 then due = redis.call('ZCOUNT', KEYS[2], '-inf', ARGV[1]) end
local inflight = redis.call('ZCARD', KEYS[3])
local dead = redis.call('ZCARD', KEYS[4])
local completed = tonumber(redis.call('HGET', KEYS[5], 'completed') or 0) or 0
local oldest = 0
if ready > 0 then
  local head = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if head then oldest = tonumber(redis.call('HGET', ARGV[2] .. head, 'createdAt') or 0) or 0 end
end
return {ready, delayed, due, inflight, dead, completed, oldest}
