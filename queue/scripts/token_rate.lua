-- One request of a job API token with a rate (`rate: 50/s` in the tokens file), admitted or not by
-- the generic cell rate algorithm: the token's key holds its theoretical arrival time (TAT), each
-- request moves it one emission interval (window / max) on, and a request is refused while that
-- would put the TAT more than a window ahead. So no window of `windowMs` anywhere admits more than
-- `max` (a burst of `max` at once, then one per interval), where counters per fixed window let
-- twice the rate through across a window's edge. Timed by Redis' clock: every API replica shares it.
-- KEYS: 1 the token's key (`cvy:tokenrate:<name>`)
-- ARGV: 1 max (requests per window), 2 windowMs
-- Returns {admitted, retryAfterMs}: 1 and 0, or 0 and how long until one more request fits.
local max, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = window / max
local tat = math.max(tonumber(redis.call('GET', KEYS[1])) or now, now)
local nextTat = tat + interval
if nextTat - now > window then return {0, math.ceil(nextTat - window - now)} end
redis.call('SET', KEYS[1], string.format('%.3f', nextTat), 'PX', math.ceil(nextTat - now))
return {1, 0}
