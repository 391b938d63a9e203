-- Records written by other producers are checked before a script changes anything: Redis does
-- not roll a script back, so an error after a ZPOPMIN or ZREM would leave the job in no set.
-- A score ZADD accepts, as a number; nil when missing, not a number, NaN or infinite.
local function numericScore(raw)
  local n = tonumber(raw)
  if n and n == n and n > -math.huge and n < math.huge then return n end
  return nil
end

-- A counter HINCRBY accepts (Redis' strict integer syntax, well inside 64 bits).
local function isCounter(raw)
  return raw == '0' or (#raw <= 18 and string.match(raw, '^%-?[1-9]%d*$') ~= nil)
end
