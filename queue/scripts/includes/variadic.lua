-- A command whose arguments come from a table of any length. unpack() puts every value on
-- Lua's C stack (LUAI_MAXCSTACK, 8,000 in Redis): past that it fails with "too many results to
-- unpack", so a longer table is sent in runs of VARIADIC_CHUNK values, each a separate command.
-- The runs split no pair (a ZADD score and member, an HSET field and value): VARIADIC_CHUNK is
-- even. Only for commands whose runs add up to the whole (ZADD, ZREM, HSET, DEL …); returns the
-- sum of the integer replies. A table that fits in one run costs one comparison over a plain call.
local VARIADIC_CHUNK = 1000
local function callVariadic(command, key, values)
  local n = #values
  if n <= VARIADIC_CHUNK then return redis.call(command, key, unpack(values)) end
  local total = 0
  for i = 1, n, VARIADIC_CHUNK do
    total = total + redis.call(command, key, unpack(values, i, math.min(i + VARIADIC_CHUNK - 1, n)))
  end
  return total
end
