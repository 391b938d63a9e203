-- The leaderless sweeper: any worker or the operator may call it; a short mutex makes the
-- extra calls no-ops. Jobs whose lease expired go back to ready as a stall (not a failed
-- attempt); a job that stalls more than maxStalls is dead-lettered (poison-pill guard).
-- Also promotes due delayed jobs and forgets workers that stopped reporting.
--
-- Outage grace. While Redis is unreachable (a restart, a failover, a partition of the whole
-- queue) no worker can renew a lease, so right after it every lease may look expired though
-- its worker is alive. The sweeper tells this apart by its own calls: every call (mutex held
-- or not) stamps `sweptAt` in the queue's `sweeper` hash with the Redis server's clock (one
-- clock, whatever the callers' skew). When a call finds the previous stamp older than `gapMs`,
-- nobody reached Redis for that long: a grace window of `graceMs` opens (`graceUntil`), during
-- which no lease is expired and no worker report is pruned, so every live worker renews
-- first. Due delayed jobs are still promoted. A dead worker's jobs wait at most one grace.
-- No stamp yet (a new queue, or one swept only by an older version): no grace.
--
-- KEYS: 1 inflight, 2 ready, 3 dead, 4 counts, 5 wake, 6 outbox, 7 meta, 8 sweepLock,
--       9 delayed, 10 workers, 11 sweeper
-- ARGV: 1 jobPrefix, 2 queue, 3 now (ms), 4 maxStalls, 5 limit, 6 lockMs, 7 workerStaleMs,
--       8 gapMs, 9 graceMs (8, 9: '' or 0 = the values last given by a caller that knew them,
--       kept in the sweeper hash; else 15000 and 33000, for the default 30 s lease)
-- Returns {requeued, deadLettered, graceLeftMs}; requeued = deadLettered = -1 when another
-- sweeper holds the mutex. graceLeftMs > 0 while a grace window is open (nothing expired).
--- @include "includes/keys"
--- @include "includes/record"
--- @include "includes/wake"
--- @include "includes/fanIn"
--- @include "includes/promoteDue"

local jobPrefix, queue = ARGV[1], ARGV[2]
local now = tonumber(ARGV[3])
local maxStalls = tonumber(ARGV[4])

-- Redis 7 replicates scripts by effects (TIME before writes is fine); 5 and 6 need asking.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local serverNow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[11], 'sweptAt', 'graceUntil', 'gapMs', 'graceMs')
local gapMs, graceMs = tonumber(ARGV[8]) or 0, tonumber(ARGV[9]) or 0
if gapMs > 0 and graceMs > 0 then
  if tonumber(s[3]) ~= gapMs or tonumber(s[4]) ~= graceMs then redis.call('HSET', KEYS[11], 'gapMs', gapMs, 'graceMs', graceMs) end
else
  gapMs, graceMs = tonumber(s[3]) or 15000, tonumber(s[4]) or 33000
end
local sweptAt, graceUntil = tonumber(s[1]), tonumber(s[2]) or 0
if sweptAt and serverNow - sweptAt > gapMs and serverNow + graceMs > graceUntil then
  graceUntil = serverNow + graceMs
  redis.call('HSET', KEYS[11], 'graceUntil', graceUntil, 'gapAt', serverNow, 'gapMsSeen', serverNow - sweptAt)
end
redis.call('HSET', KEYS[11], 'sweptAt', serverNow)
local graceLeft = math.max(0, graceUntil - serverNow)

if not redis.call('SET', KEYS[8], '1', 'NX', 'PX', ARGV[6]) then return {-1, -1, graceLeft} end

promoteDue(jobPrefix, queue, KEYS[2], KEYS[9], KEYS[3], KEYS[4], now)
if graceLeft > 0 then return {0, 0, graceLeft} end

local requeued, dead = 0, 0
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
for _, id in ipairs(expired) do
  local jk = jobKey(jobPrefix, id)
  redis.call('ZREM', KEYS[1], id)
  local token = redis.call('HGET', jk, 'token') or ''
  local stalls = redis.call('HINCRBY', jk, 'stalls', 1)
  redis.call('HINCRBY', KEYS[4], 'stalled', 1)
  -- A score that is missing or not a number must not reach ZADD (the error would abort the
  -- script half-way, with this job out of inflight and nowhere else); nor may nan or inf.
  local score = tonumber(redis.call('HGET', jk, 'score'))
  if score and (score ~= score or score == math.huge or score == -math.huge) then score = nil end
  if stalls > maxStalls or not score then
    local reason
    if not score then
      reason = 'malformed: job record missing or its score is not a number (lease expired)'
    else
      reason = 'stalled ' .. stalls .. ' times: lease expired while running (poison-pill guard)'
    end
    redis.call('HSET', jk, 'id', id, 'queue', queue, 'state', 'dead', 'deadReason', reason, 'finishedAt', now, 'token', '')
    redis.call('ZADD', KEYS[3], now, id)
    redis.call('HINCRBY', KEYS[4], 'dead', 1)
    finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"error":' .. cjson.encode(reason) .. '}', now)
    record(KEYS[6], KEYS[7], {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'token', token, 'reason', reason})
    dead = dead + 1
  else
    redis.call('HSET', jk, 'state', 'ready', 'token', '', 'requeued', 'stalled: lease expired (' .. stalls .. ')')
    redis.call('ZADD', KEYS[2], score, id)
    record(KEYS[6], KEYS[7], {'type', 'stalled', 'id', id, 'queue', queue, 'at', now, 'token', token, 'stalls', stalls})
    requeued = requeued + 1
  end
end
if requeued > 0 then wake(KEYS[5]) end

local workers = redis.call('HGETALL', KEYS[10])
local staleBefore = now - tonumber(ARGV[7])
for i = 1, #workers, 2 do
  local ok, info = pcall(cjson.decode, workers[i + 1])
  if not ok or type(info) ~= 'table' or (tonumber(info.seen) or 0) < staleBefore then
    redis.call('HDEL', KEYS[10], workers[i])
  end
end
return {requeued, dead, 0}
