-- Delete up to `limit` dead-lettered jobs and their records (and a malformed key set aside).
-- KEYS: 1 dead
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, limit. A record that is not a
--       JSON object or lacks a field: ERR_INVALID_RECORD naming it, nothing written.
-- Returns name/value pairs purged (jobs deleted; call again until 0 for a large dead-letter set).
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/malformed"

local call, bad = wireRecord('purge_dead call', ARGV[1])
bad = bad or wireRequire('purge_dead call', call, {'jobPrefix', 'string', 'limit', 'number'})
if bad then return redis.error_reply(bad) end
local ids = redis.call('ZRANGE', KEYS[1], 0, call.limit - 1)
for _, id in ipairs(ids) do
  local jk = jobKey(call.jobPrefix, id)
  redis.call('DEL', jk, malformedKey(jk, id))
  redis.call('ZREM', KEYS[1], id)
end
return {'purged', #ids}
