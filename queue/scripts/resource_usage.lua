-- Correct one key's windows by what a job actually used, or bench the key (docs/protocol.md,
-- "Resources"). A negative delta is written at the reservation's time (it leaves the window
-- with the reservation: the window never undercounts), a positive one now (it leaves later).
-- KEYS: 1 <P>res:<name>
-- ARGV: 1 key id, 2 at (the reservation's time, ms), 3 now (ms), then pairs: unit, delta
--       (integer, may be negative), or `+bench`, until (ms): the key admits nothing until then
-- Returns the number of pairs applied (0 when the resource or key is gone).
--- @include "includes/resources"

return resourceCorrect(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV, 4)
