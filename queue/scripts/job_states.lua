-- The records of many jobs of one pipeline in one call: the start of a wait for results
-- (docs/flows.md, "Waiting for results"; queue/waiter.ts, Python Client.wait), which reads
-- thousands of records and would otherwise send a command per job.
-- KEYS: the job records (one pipeline's: they share its hash tag)
-- ARGV: 1 whole ('1': an ended job's whole record too), 2… the fields to read (the first is `state`)
-- Returns one reply per key: 0 when there is no such key; the key's type (a string) when it is
-- not a hash; else the fields' values (nil for a missing field), followed, when `whole` is '1'
-- and the job has ended (completed, dead, cancelled), by its whole record as HGETALL's flat
-- list of field, value.
local whole = ARGV[1] == '1'
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
local ENDED = {completed = true, dead = true, cancelled = true}
local out = {}
for i, key in ipairs(KEYS) do
  local values = redis.pcall('HMGET', key, unpack(fields))
  if type(values) == 'table' and values.err then
    out[i] = redis.call('TYPE', key)['ok']
  elseif not values[1] and redis.call('EXISTS', key) == 0 then
    out[i] = 0
  else
    if whole and ENDED[values[1]] then
      for _, v in ipairs(redis.call('HGETALL', key)) do values[#values + 1] = v end
    end
    out[i] = values
  end
end
return out
