-- Change one queue's group controls (docs/protocol.md, "Groups"): pause or resume one group,
-- or set or clear a concurrency limit, a rate limit or what a dead job does (onDead) — one
-- group's override, or the default for every group — or one group's weight.
-- What may now start is re-admitted: a group with waiting work goes back in the ring (the claim
-- checks its room again, so a group re-admitted while still at its limit is simply dropped
-- there) and a consumer is woken. A default change re-admits every group with waiting work:
-- O(G) for this one call, never for a claim.
-- KEYS: 1 gcontrol, 2 gwaiting, 3 gring, 4 wake (the queue's; `<Q>` is named from KEYS 1)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): action ('pause' | 'resume' | 'limit' |
--       'rate' | 'onDead' | 'weight'); optional group (left out = every group: only for 'limit',
--       'rate' and 'onDead'); optional value (left out = remove the setting): for 'limit' the
--       concurrency (a positive integer), for 'rate' `<max>/<windowMs>` (removing it drops the
--       window log too), for 'onDead' 'block' or 'continue', for 'weight' an integer 1..1000
--       (removed: weight 1). A record that is not a JSON object or lacks a field:
--       ERR_INVALID_RECORD naming it, nothing written.
-- A resume also ends a block by a dead job (`blockedBy:<g>`).
-- Returns name/value pairs regrouped (the number of groups re-admitted).
--- @include "includes/wire"
--- @include "includes/groups"

local call, bad = wireRecord('group_control call', ARGV[1])
bad = bad or wireRequire('group_control call', call, {'action', 'string'})
bad = bad or wireOptional('group_control call', call, {'group', 'string', 'value', 'string'})
if bad then return redis.error_reply(bad) end
local action, g, concurrency = call.action, call.group or '', call.value or ''
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
    redis.call('HDEL', KEYS[1], 'paused:' .. g, 'blockedBy:' .. g)
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
elseif action == 'onDead' then
  -- (what a dead job does to its group: 'block' pauses it, 'continue' (the default) runs the next)
  local field = g == '' and 'onDead' or ('onDead:' .. g)
  if concurrency == '' then
    redis.call('HDEL', KEYS[1], field)
  elseif concurrency == 'block' or concurrency == 'continue' then
    redis.call('HSET', KEYS[1], field, concurrency)
  else
    return redis.error_reply('ERR_INVALID_LIMIT onDead must be block or continue, got ' .. concurrency)
  end
elseif action == 'weight' then
  -- (turns per round: a group of weight w takes up to w jobs per visit of the ring)
  if g == '' then return redis.error_reply('ERR_INVALID_GROUP a group is required to set a weight') end
  -- (a round in progress ends: its turns are counted afresh)
  redis.call('HDEL', q .. 'gturns', g)
  if concurrency == '' then
    redis.call('HDEL', KEYS[1], 'weight:' .. g)
  else
    local n = tonumber(concurrency)
    if not n or n < 1 or n > 1000 or n ~= math.floor(n) then
      return redis.error_reply('ERR_INVALID_LIMIT weight must be an integer 1..1000, got ' .. concurrency)
    end
    redis.call('HSET', KEYS[1], 'weight:' .. g, n)
  end
else
  return redis.error_reply('ERR_INVALID_ACTION ' .. action)
end
if readmitted > 0 then wake(KEYS[4]) end
return {'regrouped', readmitted}
