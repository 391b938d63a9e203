-- Fencing tokens that stay unique across a failover. A counter alone is not enough: the
-- INCRBY of a claim lost in a failover is lost with it, and the promoted replica would issue
-- the same tokens again. So the counter never falls below a floor taken from the server clock,
-- TOKENS_PER_SECOND per second since TOKEN_EPOCH: below that rate, every token issued in a
-- second is under the next second's floor, so a primary promoted a second or more later (a
-- failover takes seconds) issues tokens above any issued before it (docs/protocol.md,
-- "Fencing tokens"). Numbers stay below 1e14 until 2072, where Lua's tostring is still exact.
local TOKEN_EPOCH = 1704067200 -- 2024-01-01T00:00:00Z
local TOKENS_PER_SECOND = 65536

-- Reserve `n` tokens on `fenceKey`; returns the highest (the tokens are top - n + 1 … top).
-- One TIME per call (none when the caller read Redis' clock already: `serverMs`), and a SET at
-- most once a second (the first claim of each second).
local function reserveTokens(fenceKey, n, serverMs)
  local seconds = serverMs and math.floor(serverMs / 1000) or tonumber(redis.call('TIME')[1])
  local floor = (seconds - TOKEN_EPOCH) * TOKENS_PER_SECOND
  local top = redis.call('INCRBY', fenceKey, n)
  if top - n >= floor then return top end
  top = floor + n
  redis.call('SET', fenceKey, top)
  return top
end
