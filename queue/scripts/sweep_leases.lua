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
-- ARGV: 1 jobPrefix, 2 queue, 3 now (ms), 4 maxStalls, 5 limit, 6 lockMs, 7 workerStaleMs,
--       8 gapMs, 9 graceMs (8, 9: '' or 0 = the values last given by a caller that knew them,
--       kept in the sweeper hash; else 15000 and 33000, for the default 30 s lease)
-- Returns {requeued, deadLettered, graceLeftMs}; requeued = deadLettered = -1 when another
-- sweeper holds the mutex. graceLeftMs > 0 while a grace window is open (nothing expired).
--- @include "includes/sweepLeases"

-- Redis 7 replicates scripts by effects (TIME before writes is fine); 5 and 6 need asking.
if redis.replicate_commands then pcall(redis.replicate_commands) end
return sweepLeases(KEYS, ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
