-- Put a schedule's next tick in line: one delayed job `sched:<name>:<tickMs>` whose data is the
-- schedule's. The schedule's `next:<name>` field only moves forward, so each tick is enqueued at
-- most once — whoever computes it (the worker running the previous tick, a second worker after a
-- stall, `schedule add`) — and a tick of a schedule removed or replaced meanwhile is not.
-- KEYS: 1 schedules, 2 ready, 3 delayed, 4 counts, 5 wake, 6 outbox, 7 meta, 8 seq
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, now (ms), name, tick
--       (ms); optional version (the schedule's version the tick was computed for; none = any). A
--       record that is not a JSON object or lacks a field: ERR_INVALID_RECORD naming it.
-- Returns 1 when the tick was enqueued, 0 when not (schedule gone or replaced, tick not later).
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/record"
--- @include "includes/wake"
--- @include "includes/enqueueJob"

local call, bad = wireRecord('schedule_tick call', ARGV[1])
bad = bad or wireRequire('schedule_tick call', call,
  {'jobPrefix', 'string', 'queue', 'string', 'now', 'number', 'name', 'string', 'tick', 'number'})
if bad then return redis.error_reply(bad) end
local jobPrefix, queue, now, name, tick = call.jobPrefix, call.queue, call.now, call.name, call.tick
local version = call.version ~= nil and tostring(call.version) or ''
local entry = redis.call('HGET', KEYS[1], name)
if not entry then return 0 end
local ok, spec = pcall(cjson.decode, entry)
if not ok or type(spec) ~= 'table' then return 0 end
if version ~= '' and tostring(spec.version) ~= version then return 0 end
local last = tonumber(redis.call('HGET', KEYS[1], 'next:' .. name) or '')
if last and tick <= last then return 0 end
redis.call('HSET', KEYS[1], 'next:' .. name, tick)
local id = 'sched:' .. name .. ':' .. tick
if redis.call('EXISTS', jobKey(jobPrefix, id)) == 1 then return 0 end
local keys = {ready = KEYS[2], line = lineKeyOf(KEYS[2]), delayed = KEYS[3], counts = KEYS[4], outbox = KEYS[6], meta = KEYS[7], seq = KEYS[8]}
local data = type(spec.data) == 'string' and spec.data or 'null'
local delay = math.max(0, tick - now)
if enqueueJob(keys, jobPrefix, queue, now, id, data, 0, delay, tostring(spec.attempts or 3), '0', '', '', {'schedule', name}) then
  wake(KEYS[5])
end
return 1
