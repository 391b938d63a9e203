-- One request of a job API token with a rate (`rate: 50/s` in the tokens file), admitted or not by
-- the generic cell rate algorithm: the token's key holds its theoretical arrival time (TAT), each
-- request moves it one emission interval (window / max) on, and a request is refused while that
-- would put the TAT more than a window ahead. So no window of `windowMs` anywhere admits more than
-- `max` (a burst of `max` at once, then one per interval), where counters per fixed window let
-- twice the rate through across a window's edge. Timed by Redis' clock: every API replica shares it.
-- KEYS: 1 the token's key (`cvy:tokenrate:<name>`)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): max (requests per window, ≥ 1), windowMs.
--       A record that is not a JSON object or lacks a field: ERR_INVALID_RECORD naming it.
-- Returns name/value pairs admitted (1 or 0) and, when not admitted, retryAfterMs (how long until
-- one more request fits).
--- @include "includes/wire"

local call, bad = wireRecord('token_rate call', ARGV[1])
bad = bad or wireRequire('token_rate call', call, {'max', 'number', 'windowMs', 'number'})
if not bad and (call.max < 1 or call.windowMs < 1) then
  bad = 'ERR_INVALID_RECORD token_rate call: max and windowMs must be at least 1, got ' .. call.max .. ' and ' .. call.windowMs
end
if bad then return redis.error_reply(bad) end
local max, window = call.max, call.windowMs
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = window / max
local tat = math.max(tonumber(redis.call('GET', KEYS[1])) or now, now)
local nextTat = tat + interval
if nextTat - now > window then return {'admitted', 0, 'retryAfterMs', math.ceil(nextTat - window - now)} end
redis.call('SET', KEYS[1], string.format('%.3f', nextTat), 'PX', math.ceil(nextTat - now))
return {'admitted', 1}
