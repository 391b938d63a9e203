-- Tell the dependents of a flow's jobs that ended without telling them (docs/flows.md, "Across
-- releases"): a worker of a release before flows completes, dead-letters or cancels a flow job
-- without reading its `dependents`, which then wait for good. Each job of the flow with no
-- outcome stored (`r:`/`e:` in the flow's hash) whose record has ended gets the end it would have
-- had (flowJobEnded: its outcome stored, its dependents released, or cancelled by their policy).
-- Open jobs and jobs already told are left alone, so a second call tells none again.
-- KEYS: 1 the flow's hash (`<P>flow:<id>`)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, now (ms), id (the flow's). A
--       record that is not a JSON object or lacks a field: ERR_INVALID_RECORD naming it, nothing
--       written.
-- Returns name/value pairs told (jobs told; -1 when there is no such flow), gone (ended jobs
-- whose record is gone: reclaimed, not told) and total (jobs in the flow).
--- @include "includes/wire"
--- @include "includes/flow"

local call, bad = wireRecord('flow_repair call', ARGV[1])
bad = bad or wireRequire('flow_repair call', call, {'jobPrefix', 'string', 'now', 'number', 'id', 'string'})
if bad then return redis.error_reply(bad) end
local jobPrefix, now, fid = call.jobPrefix, call.now, call.id
local all = redis.call('HGETALL', KEYS[1])
if #all == 0 then return {'told', -1, 'gone', 0, 'total', 0} end
local told, gone, total = 0, 0, 0
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == 'k:' then
    total = total + 1
    local key, id = string.sub(all[i], 3), all[i + 1]
    -- (read now, not from the snapshot: telling one job may have cancelled and told others)
    local o = redis.call('HMGET', KEYS[1], 'r:' .. key, 'e:' .. key)
    if not o[1] and not o[2] then
      local f = redis.call('HMGET', jobKey(jobPrefix, id), 'state', 'result', 'dependents', 'deadReason')
      local quoted = cjson.encode(id)
      if f[1] == 'completed' then
        flowJobEnded(jobPrefix, now, fid, key, id, f[3], '{"id":' .. quoted .. ',"result":' .. (f[2] or 'null') .. '}', false)
        told = told + 1
      elseif f[1] == 'dead' then
        flowJobEnded(jobPrefix, now, fid, key, id, f[3], '{"id":' .. quoted .. ',"error":' .. cjson.encode(f[4] or 'dead') .. '}', 'dead')
        told = told + 1
      elseif f[1] == 'cancelled' then
        flowJobEnded(jobPrefix, now, fid, key, id, f[3], '{"id":' .. quoted .. ',"error":"cancelled"}', 'cancelled')
        told = told + 1
      elseif not f[1] then
        gone = gone + 1
      end
    end
  end
end
return {'told', told, 'gone', gone, 'total', total}
