-- Remove a schedule and its pending tick (the delayed job `sched:<name>:<next>`; a tick already
-- due or running is left to finish, and then enqueues nothing: the schedule is gone).
-- KEYS: 1 schedules, 2 delayed
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, name. A record that is not a
--       JSON object or lacks a field: ERR_INVALID_RECORD naming it, nothing written.
-- Returns name/value pairs existed (1 when the schedule existed, else 0).
--- @include "includes/wire"

local call, bad = wireRecord('schedule_remove call', ARGV[1])
bad = bad or wireRequire('schedule_remove call', call, {'jobPrefix', 'string', 'name', 'string'})
if bad then return redis.error_reply(bad) end
local name = call.name
local existed = redis.call('HDEL', KEYS[1], name)
local nextTick = redis.call('HGET', KEYS[1], 'next:' .. name)
redis.call('HDEL', KEYS[1], 'next:' .. name)
if nextTick then
  local id = 'sched:' .. name .. ':' .. nextTick
  if redis.call('ZREM', KEYS[2], id) == 1 then redis.call('DEL', call.jobPrefix .. id) end
end
return {'existed', existed}
