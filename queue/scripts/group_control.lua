-- Change one queue's group controls (docs/protocol.md, "Groups"): pause or resume one group,
-- or set or clear a concurrency limit or a rate limit — one group's override, or the default
-- for every group.
-- What may now start is re-admitted: a group with waiting work goes back in the ring (the claim
-- checks its room again, so a group re-admitted while still at its limit is simply dropped
-- there) and a consumer is woken. A default change re-admits every group with waiting work:
-- O(G) for this one call, never for a claim.
-- KEYS: 1 gcontrol, 2 gwaiting, 3 gring, 4 wake (the queue's; `<Q>` is named from KEYS 1)
-- ARGV: 1 action ('pause' | 'resume' | 'limit' | 'rate'), 2 group ('' = every group: only for
--       'limit' and 'rate'), 3 for 'limit' the concurrency (a positive integer, or '' = remove
--       the limit), for 'rate' `<max>/<windowMs>` (or '' = remove it; the window log goes too)
-- Returns the number of groups re-admitted.
--- @include "includes/groups"

local action, g, concurrency = ARGV[1], ARGV[2], ARGV[3]
local q = string.sub(KEYS[1], 1, #KEYS[1] - #'gcontrol')
if #g > GROUP_MAX_BYTES then return redis.error_reply('ERR_INVALID_GROUP group is ' .. #g .. ' bytes, limit ' .. GROUP_MAX_BYTES) end
local function readmit(group)
  if tonumber(redis.call('HGET', KEYS[2], group) or 0) > 0 then
    -- (a group waiting in the ring for its rate window takes a turn again: the claim re-checks)
    local score = tonumber(redis.call('ZSCORE', KEYS[3], group))
    if score and score >= RING_WAIT then redis.call('ZREM', KEYS[3], group) end
    ringAdd(q, group)
    return 1
  end
  return 0
end
local function readmitAll()
  local n = 0
  local all = redis.call('HGETALL', KEYS[2])
  for i = 1, #all, 2 do
    if all[i] ~= '' and tonumber(all[i + 1]) > 0 then n = n + readmit(all[i]) end
  end
  return n
end
local readmitted = 0
if action == 'pause' or action == 'resume' then
  if g == '' then return redis.error_reply('ERR_INVALID_GROUP a group is required to ' .. action) end
  if action == 'pause' then
    -- (a paused group leaves the ring lazily: the claim drops it at its next turn)
    redis.call('HSET', KEYS[1], 'paused:' .. g, '1')
  else
    redis.call('HDEL', KEYS[1], 'paused:' .. g)
    readmitted = readmit(g)
  end
elseif action == 'limit' then
  local field = g == '' and 'concurrency' or ('concurrency:' .. g)
  if concurrency == '' then
    redis.call('HDEL', KEYS[1], field)
  else
    local n = tonumber(concurrency)
    if not n or n < 1 or n ~= math.floor(n) then
      return redis.error_reply('ERR_INVALID_LIMIT concurrency must be a positive integer, got ' .. concurrency)
    end
    redis.call('HSET', KEYS[1], field, n)
  end
  readmitted = g ~= '' and readmit(g) or readmitAll()
elseif action == 'rate' then
  local field = g == '' and 'rate' or ('rate:' .. g)
  if concurrency == '' then
    redis.call('HDEL', KEYS[1], field)
    if g ~= '' then redis.call('DEL', groupRateLogKey(q, g)) end
  else
    local max, window = string.match(concurrency, '^(%d+)/(%d+)$')
    if not max or tonumber(max) < 1 or tonumber(window) < 1 then
      return redis.error_reply('ERR_INVALID_LIMIT rate must be <max>/<windowMs>, got ' .. concurrency)
    end
    redis.call('HSET', KEYS[1], field, concurrency)
  end
  readmitted = g ~= '' and readmit(g) or readmitAll()
else
  return redis.error_reply('ERR_INVALID_ACTION ' .. action)
end
if readmitted > 0 then wake(KEYS[4]) end
return readmitted
