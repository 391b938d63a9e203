-- Correct one key's windows by what a job actually used, or sideline the key (docs/protocol.md,
-- "Resources"). A negative delta is written at the reservation's time (it leaves the window
-- with the reservation: the window never undercounts), a positive one now (it leaves later).
-- Room freed by a negative delta re-admits the queue's groups waiting for this resource at once
-- (they take turns in the ring again and a consumer is woken) instead of at their wait time.
-- KEYS: 1 <P>res:<name>, 2 (optional) <Q>gbudget of the job's queue
-- ARGV: 1 key id, 2 at (the reservation's time, ms), 3 now (ms), then pairs: unit, delta
--       (integer, may be negative), or `+bench`, until (ms): the key admits nothing until then
-- Returns the number of pairs applied (0 when the resource or key is gone).
--- @include "includes/resources"
--- @include "includes/groups"

local applied, freed = resourceCorrect(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV, 4)
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
