-- Cancel a flow (docs/flows.md): every unfinished job of it, as cancel_job cancels one
-- (includes/cancelJob.lua): running ones are aborted at their worker's next renewal. A
-- dependent whose parents all end in this call stays waiting until it is cancelled itself, so
-- none starts. Finished jobs are left as they are.
-- KEYS: 1 outbox, 2 meta (the pipeline's), 3 the flow's hash (`<P>flow:<id>`)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, now (ms); optional
--       retentionSeconds (0 or left out = keep the records). A record that is not a JSON object
--       or lacks a field: ERR_INVALID_RECORD naming it, nothing written.
-- Returns name/value pairs cancelled (jobs cancelled; -1 when there is no such flow) and total
-- (jobs in the flow).
--- @include "includes/wire"
--- @include "includes/cancelJob"

local call, bad = wireRecord('cancel_flow call', ARGV[1])
bad = bad or wireRequire('cancel_flow call', call, {'jobPrefix', 'string', 'now', 'number'})
bad = bad or wireOptional('cancel_flow call', call, {'retentionSeconds', 'number'})
if bad then return redis.error_reply(bad) end
local cx = {outbox = KEYS[1], meta = KEYS[2], jobPrefix = call.jobPrefix, now = call.now, retention = call.retentionSeconds or 0, hold = true}
local all = redis.call('HGETALL', KEYS[3])
if #all == 0 then return {'cancelled', -1, 'total', 0} end
local n, total = 0, 0
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == 'k:' then
    total = total + 1
    n = n + (cancelOne(cx, all[i + 1], 0))
  end
end
return {'cancelled', n, 'total', total}
