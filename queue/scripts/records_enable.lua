-- Switch job records on for a pipeline (docs/records.md, "When records switch on"): the
-- recorders' consumer group on the outbox, from the stream's beginning (a recorder that starts
-- later reads every entry, and entries trimmed before then are counted), then `<P>meta`
-- `records` = `1`, from which on every transition of the pipeline is appended to the outbox.
-- Idempotent: when both are there already it writes nothing.
-- KEYS: 1 <P>outbox, 2 <P>meta   ARGV: 1 the recorders' consumer group (`conveyor-records`)
-- Returns 1 when it switched records on, 0 when they were on.
local made = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
if type(made) == 'table' and made.err and not string.find(made.err, 'BUSYGROUP', 1, true) then
  return redis.error_reply(made.err)
end
if redis.call('HGET', KEYS[2], 'records') == '1' then return 0 end
redis.call('HSET', KEYS[2], 'records', '1')
return 1
