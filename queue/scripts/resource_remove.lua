-- Delete a resource (docs/protocol.md, "Resources"): its keys, windows and benches.
-- KEYS: 1 <P>res:<name>, 2 <P>resources
-- ARGV: none (the resource's name is read from KEYS 1)
-- Returns name/value pairs existed (1 when it existed, else 0).
local name = string.match(KEYS[1], ':res:(.+)$')
redis.call('SREM', KEYS[2], name)
return {'existed', redis.call('DEL', KEYS[1])}
