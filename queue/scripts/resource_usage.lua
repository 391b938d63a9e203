-- Correct one key's windows by what a job actually used, or sideline the key (docs/protocol.md,
-- "Resources"). A negative delta is written at the reservation's time (it leaves the window
-- with the reservation: the window never undercounts), a positive one now (it leaves later).
-- Room freed by a negative delta re-admits the queue's groups waiting for this resource at once
-- (they take turns in the ring again and a consumer is woken) instead of at their wait time.
-- KEYS: 1 <P>res:<name>, 2 (optional) <Q>gbudget of the job's queue
-- ARGV: 1 the call's record (JSON, includes/wire.lua): key (its id), at (the reservation's
--       time, ms), now (ms), optional benchUntilMs (the key admits nothing until then; no pairs
--       follow); 2… pairs: unit, delta (integer, may be negative). A record that is not a JSON
--       object or lacks a field: ERR_INVALID_RECORD naming it.
-- Returns the number of corrections applied, the bench counting one (0 when the resource or key
-- is gone).
--- @include "includes/wire"
--- @include "includes/resources"
--- @include "includes/groups"

local call, bad = wireRecord('resource_usage call', ARGV[1])
bad = bad or wireRequire('resource_usage call', call, {'key', 'string', 'at', 'number', 'now', 'number'})
bad = bad or wireOptional('resource_usage call', call, {'benchUntilMs', 'number'})
if bad then return redis.error_reply(bad) end
local applied, freed
if call.benchUntilMs then
  applied, freed = resourceCorrect(KEYS[1], call.key, call.at, call.now, {'+bench', call.benchUntilMs}, 1)
else
  applied, freed = resourceCorrect(KEYS[1], call.key, call.at, call.now, ARGV, 2)
end
if freed and KEYS[2] then
  local name = string.match(KEYS[1], ':res:(.+)$')
  local q = string.sub(KEYS[2], 1, #KEYS[2] - 7)
  local waits = redis.call('HGETALL', KEYS[2])
  local back = false
  for i = 1, #waits, 2 do
    if waits[i + 1] == name then
      redis.call('HDEL', KEYS[2], waits[i])
      redis.call('ZREM', q .. 'gring', waits[i])
      ringAdd(q, waits[i])
      back = true
    end
  end
  if back then wake(q .. 'wake') end
end
return applied
