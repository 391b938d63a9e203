-- A waiting job's data longer than PARK_DATA_BYTES waits in its own string key `<P>data:<id>`
-- until the job is claimed or cancelled (docs/protocol.md, "Job record fields"): one hash field
-- past hash-max-listpack-value (64 by default) turns the whole record from a listpack into a
-- hashtable, where every field costs a dict entry and two allocations (~250 B per waiting job at
-- 1 KiB, measured). Put back in the record when the job leaves waiting, so every other script
-- and reader sees the whole record. `jk` is `<P>job:<id>`: the key is in the same slot.
local PARK_DATA_BYTES = 64
local function dataKeyOf(jk, id)
  return string.sub(jk, 1, #jk - #id - 4) .. 'data:' .. id
end

-- Move parked data back into the record; returns it (nil: none was parked).
local function unparkData(jk, id)
  local dk = dataKeyOf(jk, id)
  local d = redis.pcall('GET', dk)
  if type(d) ~= 'string' then return nil end
  redis.call('HSET', jk, 'data', d)
  redis.call('DEL', dk)
  return d
end
