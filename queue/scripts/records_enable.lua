-- Switch job records on for a pipeline (docs/records.md, "When records switch on"): the
-- recorders' consumer group on the outbox, from the stream's beginning (a recorder that starts
-- later reads every entry, and entries trimmed before then are counted), then `<P>meta`
-- `records` = `1`, from which on every transition of the pipeline is appended to the outbox.
-- Idempotent: when both are there already it writes nothing.
-- KEYS: 1 <P>outbox, 2 <P>meta
-- ARGV: 1 the call's record (JSON, includes/wire.lua): group (the recorders' consumer group,
--       `conveyor-records`). A record that is not a JSON object or lacks a field:
--       ERR_INVALID_RECORD naming it, nothing written.
-- Returns name/value pairs switched (1 when it switched records on, 0 when they were on).
--- @include "includes/wire"

local call, bad = wireRecord('records_enable call', ARGV[1])
bad = bad or wireRequire('records_enable call', call, {'group', 'string'})
if bad then return redis.error_reply(bad) end
local made = redis.pcall('XGROUP', 'CREATE', KEYS[1], call.group, '0', 'MKSTREAM')
if type(made) == 'table' and made.err and not string.find(made.err, 'BUSYGROUP', 1, true) then
  return redis.error_reply(made.err)
end
if redis.call('HGET', KEYS[2], 'records') == '1' then return {'switched', 0} end
redis.call('HSET', KEYS[2], 'records', '1')
return {'switched', 1}
