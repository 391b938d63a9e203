-- Run a delayed job now: it leaves the delayed set for ready — a priority-0 job at the tail of
-- the line, a prioritised one at its own score (the one enqueue gave it, so it keeps its place
-- among jobs of its priority) — and a `promoted`
-- event is recorded like an enqueue's. A job that is not delayed is left as it is.
-- KEYS: 1 delayed, 2 ready, 3 wake, 4 outbox, 5 meta
-- ARGV: 1 jobPrefix, 2 id, 3 queue, 4 now (ms)
-- Returns {outcome, state}: 'promoted' (state 'delayed'), 'notDelayed' (state: what the job is;
-- nothing changed) or 'notFound'.
--- @include "includes/keys"
--- @include "includes/numbers"
--- @include "includes/record"
--- @include "includes/wake"
--- @include "includes/readyLine"

local id, queue, now = ARGV[2], ARGV[3], tonumber(ARGV[4])
local jk = jobKey(ARGV[1], id)
local f = redis.pcall('HMGET', jk, 'state', 'score', 'priority', 'group', 'holdsGroup')
if f.err or not f[1] then return {'notFound', ''} end
local score = inLine(f[3]) or (f[2] and numericScore(f[2]))
-- Only a job waiting in this queue's delayed set moves; a malformed score stays for promoteDue to dead-letter.
if f[1] ~= 'delayed' or not score or not redis.call('ZSCORE', KEYS[1], id) then return {'notDelayed', f[1]} end
redis.call('ZREM', KEYS[1], id)
redis.call('HSET', jk, 'state', 'ready')
-- (a sequenced retry goes back to the head of its group, and only then frees its slot: groups.lua)
local held = f[5] == '1' and f[4]
putReady(KEYS[2], jk, id, held, f[3], f[2], f[4])
if held then groupHeldReleased(queuePrefixOfReady(KEYS[2]), held, jk) end
record(KEYS[4], KEYS[5], {'type', 'promoted', 'id', id, 'queue', queue, 'at', now})
wake(KEYS[3])
return {'promoted', 'delayed'}
