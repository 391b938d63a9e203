-- Remove a schedule and its pending tick (the delayed job `sched:<name>:<next>`; a tick already
-- due or running is left to finish, and then enqueues nothing: the schedule is gone).
-- KEYS: 1 schedules, 2 delayed
-- ARGV: 1 jobPrefix, 2 name
-- Returns 1 when the schedule existed, else 0.
local name = ARGV[2]
local existed = redis.call('HDEL', KEYS[1], name)
local nextTick = redis.call('HGET', KEYS[1], 'next:' .. name)
redis.call('HDEL', KEYS[1], 'next:' .. name)
if nextTick then
  local id = 'sched:' .. name .. ':' .. nextTick
  if redis.call('ZREM', KEYS[2], id) == 1 then redis.call('DEL', ARGV[1] .. id) end
end
return existed
