-- Delete up to `limit` dead-lettered jobs and their records (and a malformed key set aside).
-- KEYS: 1 dead
-- ARGV: 1 jobPrefix, 2 limit
-- Returns the number purged (call again until 0 for a large dead-letter set).
--- @include "includes/keys"
--- @include "includes/malformed"

local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
for _, id in ipairs(ids) do
  local jk = jobKey(ARGV[1], id)
  redis.call('DEL', jk, malformedKey(jk, id))
  redis.call('ZREM', KEYS[1], id)
end
return #ids
