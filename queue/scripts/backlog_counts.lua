-- The counts of one queue that scaling reads, in one atomic call (QueueAdmin.counts, `conveyor
-- status`). The operator reads many queues at once with poll_queues.
--
-- KEYS: 1 ready, 2 delayed, 3 inflight, 4 dead, 5 counts
-- ARGV: 1 now (ms), 2 jobPrefix
-- Returns {ready, delayed, dueDelayed, inflight, dead, completed, oldestReadyCreatedAt,
-- enqueued, budget, ended, runMs, waitingChildren}: oldestReadyCreatedAt is 0 when nothing is ready (or no head job has a
-- createdAt); enqueued is the lifetime enqueue counter (the arrival rate is its growth over
-- time); budget: waiting jobs no resource key can pay for now (docs/protocol.md, "Resources"),
-- not in ready; ended, the attempts that ended (completed + failed), and runMs, their total run
-- time (claim → settle): lifetime counters, their growth over time the mean time a job holds a slot;
-- waitingChildren: flow jobs waiting for their parents, in no count above (docs/flows.md).
--- @include "includes/backlogCounts"

return backlogCounts(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2])
