-- How many of a queue's grouped waiting jobs could start now (docs/protocol.md, "Groups": "What
-- the operator reads"), for the operator's admissible-replica cap. Read-only.
-- Only groups in `<Q>gring` can be admitted: a group with waiting work and room is always in it
-- (whatever gives a group room puts it back), a group at its concurrency limit or paused is
-- dropped from it by the claim. Per ring group: min(waiting, room), room = limit − running (∞
-- without a limit, 0 while paused, at most the rate limit's max: a group waiting for its window
-- counts what its next window allows). The scan walks the ring in turn order and stops once the
-- sum reaches `enough` (more would not change the caller's decision: every ring group adds ≥ 1)
-- or after `scanLimit` groups, so a poll costs O(min(G, enough, scanLimit)), never O(G).
-- KEYS: 1 gring, 2 gwaiting, 3 grunning, 4 gcontrol (the queue's)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): enough (stop when the sum reaches it),
--       scanLimit (most groups looked at). A record that is not a JSON object or lacks a field:
--       ERR_INVALID_RECORD naming it.
-- Returns name/value pairs waiting (grouped waiting jobs), admissible, scanned, ring (the ring's
-- size): admissible is exact when scanned =
-- ringSize or admissible ≥ enough, else the sum over the first `scanned` groups of the ring.
--- @include "includes/wire"

local call, bad = wireRecord('group_admission call', ARGV[1])
bad = bad or wireRequire('group_admission call', call, {'enough', 'number', 'scanLimit', 'number'})
if bad then return redis.error_reply(bad) end
local enough, scanLimit = call.enough, call.scanLimit
local waiting = math.max(0, tonumber(redis.call('HGET', KEYS[2], '')) or 0)
local ringSize = redis.call('ZCARD', KEYS[1])
local defaults = redis.call('HMGET', KEYS[4], 'concurrency', 'rate')
local defaultLimit, defaultRate = tonumber(defaults[1]), defaults[2]
local function rateMax(rate)
  return rate and tonumber(string.match(rate, '^(%d+)/')) or nil
end
local BATCH = 100
local admissible, scanned = 0, 0
while admissible < enough and scanned < math.min(ringSize, scanLimit) do
  local names = redis.call('ZRANGE', KEYS[1], scanned, scanned + math.min(BATCH, scanLimit - scanned) - 1)
  if #names == 0 then break end
  local w = redis.call('HMGET', KEYS[2], unpack(names))
  local r = redis.call('HMGET', KEYS[3], unpack(names))
  local fields = {}
  for i, g in ipairs(names) do
    fields[3 * i - 2], fields[3 * i - 1], fields[3 * i] = 'paused:' .. g, 'concurrency:' .. g, 'rate:' .. g
  end
  local c = redis.call('HMGET', KEYS[4], unpack(fields))
  for i = 1, #names do
    local room = 0
    -- (the member '' is the queue's own jobs' turn, not a group: claimJobs.lua)
    if names[i] ~= '' and c[3 * i - 2] ~= '1' then
      local limit = tonumber(c[3 * i - 1]) or defaultLimit
      room = limit and math.max(0, limit - (tonumber(r[i]) or 0)) or math.huge
      local max = rateMax(c[3 * i] or defaultRate)
      if max then room = math.min(room, max) end
    end
    admissible = admissible + math.min(math.max(0, tonumber(w[i]) or 0), room)
  end
  scanned = scanned + #names
end
return {'waiting', waiting, 'admissible', admissible, 'scanned', scanned, 'ring', ringSize}
