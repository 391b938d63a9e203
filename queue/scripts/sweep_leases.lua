-- The leaderless sweeper: any worker or the operator may call it; a short mutex makes the
-- extra calls no-ops. Jobs whose lease expired go back to ready as a stall (not a failed
-- attempt); a job that stalls more than maxStalls is dead-lettered (poison-pill guard).
-- Also promotes due delayed jobs and forgets workers that stopped reporting.
--
-- Outage grace. While Redis is unreachable (a restart, a failover, a partition of the whole
-- queue) no worker can renew a lease, so right after it every lease may look expired though
-- its worker is alive. The sweeper tells this apart by its own calls: every call (mutex held
-- or not) stamps `sweptAt` in the queue's `sweeper` hash with the Redis server's clock (one
-- clock, whatever the callers' skew). When a call finds the previous stamp older than `gapMs`,
-- nobody reached Redis for that long: a grace window of `graceMs` opens (`graceUntil`), during
-- which no lease is expired and no worker report is pruned, so every live worker renews
-- first. Due delayed jobs are still promoted. A dead worker's jobs wait at most one grace.
-- No stamp yet (a new queue, or one swept only by an older version): no grace.
--
-- KEYS: 1 inflight, 2 ready, 3 dead, 4 counts, 5 wake, 6 outbox, 7 meta, 8 sweepLock,
--       9 delayed, 10 workers, 11 sweeper
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, queue, now (ms), maxStalls,
--       limit, lockMs, workerStaleMs; optional gapMs, graceMs (absent or 0: the values last given
--       by a caller that knew them, kept in the sweeper hash; else 15000 and 33000, for the
--       default 30 s lease). A record that is not a JSON object or lacks a field:
--       ERR_INVALID_RECORD naming it.
-- Returns name/value pairs requeued, dead (dead-lettered), graceLeftMs; requeued = dead = -1
-- when another sweeper holds the mutex. graceLeftMs > 0 while a grace window is open (nothing
-- expired).
--- @include "includes/wire"
--- @include "includes/sweepLeases"

-- Redis 7 replicates scripts by effects (TIME before writes is fine); 5 and 6 need asking.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local call, bad = wireRecord('sweep_leases call', ARGV[1])
bad = bad or wireRequire('sweep_leases call', call, {'jobPrefix', 'string', 'queue', 'string', 'now', 'number',
  'maxStalls', 'number', 'limit', 'number', 'lockMs', 'number', 'workerStaleMs', 'number'})
if bad then return redis.error_reply(bad) end
local r = sweepLeases(KEYS, call.jobPrefix, call.queue, call.now, call.maxStalls, call.limit, call.lockMs,
  call.workerStaleMs, call.gapMs, call.graceMs)
return {'requeued', r[1], 'dead', r[2], 'graceLeftMs', r[3]}
