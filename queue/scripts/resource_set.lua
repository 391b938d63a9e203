-- Create or replace a resource (docs/protocol.md, "Resources"): its ceiling and its keys' limits.
-- Keys kept keep their window logs, benches and counts; a key left out loses them.
-- KEYS: 1 <P>res:<name>, 2 <P>resources
-- ARGV: 1 the call's record (JSON, includes/wire.lua): ceiling (0 < c <= 1, the text stored);
--       then per key: id, limits ('<unit>=<max>/<windowMs>,…'). A record that is not a JSON
--       object or lacks a field: ERR_INVALID_RECORD naming it.
-- Returns the number of keys.
--- @include "includes/wire"

local call, bad = wireRecord('resource_set call', ARGV[1])
bad = bad or wireRequire('resource_set call', call, {'ceiling', 'string'})
if bad then return redis.error_reply(bad) end
local res = KEYS[1]
local name = string.match(res, ':res:(.+)$')
local ceiling = tonumber(call.ceiling)
if not ceiling or ceiling <= 0 or ceiling > 1 then return redis.error_reply('ERR_INVALID_RESOURCE ceiling must be in (0, 1]') end
local ids, wanted, fields = {}, {}, {'ceiling', call.ceiling}
for i = 2, #ARGV, 2 do
  local id, limits = ARGV[i], ARGV[i + 1]
  if not limits or not string.match(limits, '^[a-z][a-z0-9_]*=%d+/%d+') then
    return redis.error_reply('ERR_INVALID_RESOURCE key ' .. tostring(id) .. ': limits must be <unit>=<max>/<windowMs>,…')
  end
  ids[#ids + 1] = id
  wanted[id] = limits
  fields[#fields + 1] = 'limits:' .. id
  fields[#fields + 1] = limits
end
if #ids == 0 then return redis.error_reply('ERR_INVALID_RESOURCE a resource needs at least one key') end
-- Drop what belongs to keys no longer there, and logs of units a kept key no longer limits.
local old = redis.call('HKEYS', res)
local drop = {}
for _, f in ipairs(old) do
  local kind, rest = string.match(f, '^(%a+):(.+)$')
  if kind == 'limits' or kind == 'bench' or kind == 'admitted' then
    if not wanted[rest] then drop[#drop + 1] = f end
  elseif kind == 'log' then
    local id, unit = string.match(rest, '^(.+):([^:]+)$')
    if not id or not wanted[id] or not string.find(',' .. wanted[id], ',' .. unit .. '=', 1, true) then drop[#drop + 1] = f end
  end
end
if #drop > 0 then redis.call('HDEL', res, unpack(drop)) end
fields[#fields + 1] = 'keys'
fields[#fields + 1] = table.concat(ids, ',')
redis.call('HSET', res, unpack(fields))
redis.call('SADD', KEYS[2], name)
return #ids
