-- The counts of one queue that scaling reads, in one atomic call (QueueAdmin.counts, `conveyor
-- status`). The operator reads many queues at once with poll_queues.
--
-- KEYS: 1 ready, 2 delayed, 3 inflight, 4 dead, 5 counts
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, now (ms). A record that is
--       not a JSON object or lacks a field: ERR_INVALID_RECORD naming it.
-- Returns name/value pairs ready, delayed, dueDelayed, inflight, dead, completed, enqueued,
-- waitingForBudget, ended, runMs, waitingChildren and oldestReadyAt (left out when nothing is
-- ready or no head job has a createdAt): enqueued is the lifetime enqueue counter (the arrival
-- rate is its growth over time); waitingForBudget: waiting jobs no resource key can pay for now
-- (docs/protocol.md, "Resources"), not in ready; ended, the attempts that ended (completed +
-- failed), and runMs, their total run time (claim → settle): lifetime counters, their growth
-- over time the mean time a job holds a slot; waitingChildren: flow jobs waiting for their
-- parents, in no count above (docs/flows.md).
--- @include "includes/wire"
--- @include "includes/backlogCounts"

local call, bad = wireRecord('backlog_counts call', ARGV[1])
bad = bad or wireRequire('backlog_counts call', call, {'jobPrefix', 'string', 'now', 'number'})
if bad then return redis.error_reply(bad) end
return backlogCountsNamed(backlogCounts(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], call.now, call.jobPrefix))
