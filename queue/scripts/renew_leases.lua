-- The batched lease heartbeat: extend every lease this worker still holds, in one call, report
-- the worker's busy/idle state for the operator's scale-in choice, and read whether the operator
-- has cordoned the worker's pod (a scale-in waits for it: claim nothing new).
-- KEYS: 1 inflight, 2 workers, 3 cordon
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, now (ms), leaseMs, workerId,
--       optional workerInfo (the report, JSON text) and pod (absent: no cordon check); then id,
--       token pairs. A record that is not a JSON object or lacks a field: ERR_INVALID_RECORD
--       naming it.
-- Returns name/value pairs lost, cancelled and cordonedUntil: the ids whose lease this worker no
-- longer holds (fenced off), those among them that were cancelled (the worker aborts their
-- handlers with a cancel reason), and until when (ms) the pod is cordoned (left out when not).
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/lease"

local call, bad = wireRecord('renew_leases call', ARGV[1])
bad = bad or wireRequire('renew_leases call', call,
  {'jobPrefix', 'string', 'now', 'number', 'leaseMs', 'number', 'workerId', 'string'})
if bad then return redis.error_reply(bad) end
local jobPrefix = call.jobPrefix
local deadline = call.now + call.leaseMs
local lost, cancelled = {}, {}
for i = 2, #ARGV, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  local problem = leaseProblem(jobKey(jobPrefix, id), token)
  if not problem then
    redis.call('ZADD', KEYS[1], 'XX', deadline, id)
  else
    lost[#lost + 1] = id
    if problem == 'cancelled' then cancelled[#cancelled + 1] = id end
  end
end
if type(call.workerInfo) == 'string' and call.workerInfo ~= '' then redis.call('HSET', KEYS[2], call.workerId, call.workerInfo) end
local reply = {'lost', lost, 'cancelled', cancelled}
if type(call.pod) == 'string' and call.pod ~= '' then
  local cordonEnd = tonumber(redis.call('HGET', KEYS[3], call.pod))
  if cordonEnd and cordonEnd > call.now then
    reply[5] = 'cordonedUntil'
    reply[6] = tostring(cordonEnd)
  end
end
return reply
