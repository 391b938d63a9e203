-- Run a delayed job now: it leaves the delayed set for ready — a priority-0 job at the tail of
-- the line, a prioritised one at its own score (the one enqueue gave it, so it keeps its place
-- among jobs of its priority) — and a `promoted`
-- event is recorded like an enqueue's. A job that is not delayed is left as it is.
-- KEYS: 1 delayed, 2 ready, 3 wake, 4 outbox, 5 meta
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, id, queue, now (ms). A record
--       that is not a JSON object or lacks a field: ERR_INVALID_RECORD naming it.
-- Returns name/value pairs outcome, state: 'promoted' (state 'delayed'), 'notDelayed' (state:
-- what the job is; nothing changed) or 'notFound' (no state).
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/numbers"
--- @include "includes/record"
--- @include "includes/wake"
--- @include "includes/readyLine"

local call, bad = wireRecord('promote_job call', ARGV[1])
bad = bad or wireRequire('promote_job call', call, {'jobPrefix', 'string', 'id', 'string', 'queue', 'string', 'now', 'number'})
if bad then return redis.error_reply(bad) end
local id, queue, now = call.id, call.queue, call.now
local jk = jobKey(call.jobPrefix, id)
local f = redis.pcall('HMGET', jk, 'state', 'score', 'priority', 'group', 'holdsGroup')
if f.err or not f[1] then return {'outcome', 'notFound'} end
local score = inLine(f[3]) or (f[2] and numericScore(f[2]))
-- Only a job waiting in this queue's delayed set moves; a malformed score stays for promoteDue to dead-letter.
if f[1] ~= 'delayed' or not score or not redis.call('ZSCORE', KEYS[1], id) then return {'outcome', 'notDelayed', 'state', f[1]} end
redis.call('ZREM', KEYS[1], id)
redis.call('HSET', jk, 'state', 'ready')
-- (a sequenced retry goes back to the head of its group, and only then frees its slot: groups.lua)
local held = f[5] == '1' and f[4]
putReady(KEYS[2], jk, id, held, f[3], f[2], f[4])
if held then groupHeldReleased(queuePrefixOfReady(KEYS[2]), held, jk) end
record(KEYS[4], KEYS[5], {'type', 'promoted', 'id', id, 'queue', queue, 'at', now})
wake(KEYS[3])
return {'outcome', 'promoted', 'state', 'delayed'}
