-- Cancel a job wherever it is (includes/cancelJob.lua says what that does in each state). A
-- finished job (completed, dead, cancelled) is left as it is.
-- KEYS: 1 outbox, 2 meta (the pipeline's)
-- ARGV: 1 jobPrefix, 2 id, 3 now (ms), 4 retentionSeconds (0 = keep the record)
-- Returns {outcome, state, queue, jobsCancelled}: outcome 'cancelled' (state: what the job was —
-- ready, delayed, active, waiting-children, fannedOut, joined), 'finished' (state: completed,
-- dead, cancelled…; nothing changed) or 'notFound'.
--- @include "includes/cancelJob"

local jobPrefix = ARGV[1]
local cx = {outbox = KEYS[1], meta = KEYS[2], jobPrefix = jobPrefix, now = tonumber(ARGV[3]), retention = tonumber(ARGV[4])}

local n, state, queue = cancelOne(cx, ARGV[2], 0)
if state == nil then return {'notFound', '', '', 0} end
if n > 0 or state == 'fannedOut' and redis.call('HGET', jobKey(jobPrefix, ARGV[2]), 'state') == 'cancelled' then
  return {'cancelled', state, queue, n}
end
return {'finished', state, queue, 0}
