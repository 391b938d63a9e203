-- Cancel a job wherever it is (includes/cancelJob.lua says what that does in each state). A
-- finished job (completed, dead, cancelled) is left as it is.
-- KEYS: 1 outbox, 2 meta (the pipeline's)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, id, now (ms); optional
--       retentionSeconds (0 = keep the record). A record that is not a JSON object or lacks a
--       field: ERR_INVALID_RECORD naming it, nothing written.
-- Returns name/value pairs outcome, state, queue, jobsCancelled: outcome 'cancelled' (state:
-- what the job was — ready, delayed, active, waiting-children, fannedOut, joined), 'finished'
-- (state: completed, dead, cancelled…; nothing changed) or 'notFound' (no state, no queue).
--- @include "includes/wire"
--- @include "includes/cancelJob"

local call, bad = wireRecord('cancel_job call', ARGV[1])
bad = bad or wireRequire('cancel_job call', call, {'jobPrefix', 'string', 'id', 'string', 'now', 'number'})
if bad then return redis.error_reply(bad) end
local jobPrefix = call.jobPrefix
local cx = {outbox = KEYS[1], meta = KEYS[2], jobPrefix = jobPrefix, now = call.now, retention = call.retentionSeconds or 0}

local n, state, queue = cancelOne(cx, call.id, 0)
if state == nil then return {'outcome', 'notFound', 'jobsCancelled', 0} end
if n > 0 or state == 'fannedOut' and redis.call('HGET', jobKey(jobPrefix, call.id), 'state') == 'cancelled' then
  return {'outcome', 'cancelled', 'state', state, 'queue', queue, 'jobsCancelled', n}
end
return {'outcome', 'finished', 'state', state, 'queue', queue, 'jobsCancelled', 0}
