-- The records of many jobs of one pipeline in one call: the start of a wait for results
-- (docs/flows.md, "Waiting for results"; queue/waiter.ts, Python Client.wait), which reads
-- thousands of records and would otherwise send a command per job.
-- KEYS: the job records (one pipeline's: they share its hash tag)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): optional whole (true: an ended job's whole
--       record too); 2… the fields to read (`state` is read whether named or not). A record that
--       is not a JSON object: ERR_INVALID_RECORD naming it.
-- Returns one list of name/value pairs per key: type, the key's type, when it is not a hash
-- (`none`: there is no such key); else the fields read that the record has (a missing field left
-- out), and, when whole and the job has ended (completed, dead, cancelled), record: its whole
-- record as HGETALL's flat list of field, value.
--- @include "includes/wire"

local call, bad = wireRecord('job_states call', ARGV[1])
bad = bad or wireOptional('job_states call', call, {'whole', 'boolean'})
if bad then return redis.error_reply(bad) end
local whole = call.whole == true
local fields = {'state'}
for i = 2, #ARGV do
  if ARGV[i] ~= 'state' then fields[#fields + 1] = ARGV[i] end
end
local ENDED = {completed = true, dead = true, cancelled = true}
local out = {}
for i, key in ipairs(KEYS) do
  local values = redis.pcall('HMGET', key, unpack(fields))
  if type(values) == 'table' and values.err then
    out[i] = {'type', redis.call('TYPE', key)['ok']}
  elseif not values[1] and redis.call('EXISTS', key) == 0 then
    out[i] = {'type', 'none'}
  else
    local one = {}
    for j, name in ipairs(fields) do
      if values[j] then
        one[#one + 1] = name
        one[#one + 1] = values[j]
      end
    end
    if whole and ENDED[values[1]] then
      one[#one + 1] = 'record'
      one[#one + 1] = redis.call('HGETALL', key)
    end
    out[i] = one
  end
end
return out
