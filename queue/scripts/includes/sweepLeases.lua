--- @include "keys"
--- @include "record"
--- @include "wake"
--- @include "fanIn"
--- @include "promoteDue"
--- @include "readyLine"
--- @include "groups"
--- @include "attemptErrors"
--- @include "flow"
--- @include "notify"

-- One queue's sweep (sweep_leases.lua says what it does and why). `k` holds sweep_leases' 11
-- keys in its order: 1 inflight, 2 ready, 3 dead, 4 counts, 5 wake, 6 outbox, 7 meta,
-- 8 sweepLock, 9 delayed, 10 workers, 11 sweeper. Returns {requeued, deadLettered, graceLeftMs}.
local function sweepLeases(k, jobPrefix, queue, now, maxStalls, limit, lockMs, workerStaleMs, gapMsArg, graceMsArg)
  local t = redis.call('TIME')
  local serverNow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local s = redis.call('HMGET', k[11], 'sweptAt', 'graceUntil', 'gapMs', 'graceMs')
  local gapMs, graceMs = tonumber(gapMsArg) or 0, tonumber(graceMsArg) or 0
  if gapMs > 0 and graceMs > 0 then
    if tonumber(s[3]) ~= gapMs or tonumber(s[4]) ~= graceMs then redis.call('HSET', k[11], 'gapMs', gapMs, 'graceMs', graceMs) end
  else
    gapMs, graceMs = tonumber(s[3]) or 15000, tonumber(s[4]) or 33000
  end
  local sweptAt, graceUntil = tonumber(s[1]), tonumber(s[2]) or 0
  if sweptAt and serverNow - sweptAt > gapMs and serverNow + graceMs > graceUntil then
    graceUntil = serverNow + graceMs
    redis.call('HSET', k[11], 'graceUntil', graceUntil, 'gapAt', serverNow, 'gapMsSeen', serverNow - sweptAt)
  end
  redis.call('HSET', k[11], 'sweptAt', serverNow)
  local graceLeft = math.max(0, graceUntil - serverNow)

  if not redis.call('SET', k[8], '1', 'NX', 'PX', lockMs) then return {-1, -1, graceLeft} end

  promoteDue(jobPrefix, queue, k[2], k[9], k[3], k[4], now)
  if graceLeft > 0 then return {0, 0, graceLeft} end

  local requeued, dead = 0, 0
  local expired = redis.call('ZRANGEBYSCORE', k[1], '-inf', now, 'LIMIT', 0, tonumber(limit))
  for _, id in ipairs(expired) do
    local jk = jobKey(jobPrefix, id)
    redis.call('ZREM', k[1], id)
    local token = redis.call('HGET', jk, 'token') or ''
    local stalls = redis.call('HINCRBY', jk, 'stalls', 1)
    redis.call('HINCRBY', k[4], 'stalled', 1)
    -- A score that is missing or not a number must not reach ZADD (the error would abort the
    -- script half-way, with this job out of inflight and nowhere else); nor may nan or inf.
    -- A job of priority 0 goes back to the line and needs no score.
    local f = redis.call('HMGET', jk, 'queue', 'priority', 'score', 'group', 'attemptsMade', 'flow', 'flowKey', 'dependents', 'notify', 'createdAt')
    local score = f[1] and (inLine(f[2]) or numericScore(f[3]))
    -- (its group slot is free only now: a SIGKILLed worker's lease counted until this sweep)
    if f[4] and f[4] ~= '' then groupLeftRunning(groupQueuePrefix(jobPrefix, queue), f[4]) end
    -- (the attempt that stalled goes into `errors`, attemptErrors.lua: its retry is told)
    if f[1] then
      pushAttemptError(jk, attemptErrorJson((tonumber(f[5]) or 0) + 1, 'stalled',
        'lease expired while running: the worker stopped renewing it (stall ' .. stalls .. ')', now))
    end
    if stalls > maxStalls or not score then
      local reason
      if not score then
        reason = 'malformed: job record missing or its score is not a number (lease expired)'
      else
        reason = 'stalled ' .. stalls .. ' times: lease expired while running (poison-pill guard)'
      end
      redis.call('HSET', jk, 'id', id, 'queue', queue, 'state', 'dead', 'deadReason', reason, 'finishedAt', now, 'token', '')
      redis.call('ZADD', k[3], now, id)
      redis.call('HINCRBY', k[4], 'dead', 1)
      if f[4] and f[4] ~= '' then groupJobDied(groupQueuePrefix(jobPrefix, queue), f[4], id) end
      finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"error":' .. cjson.encode(reason) .. '}', now)
      if f[6] then flowJobEnded(jobPrefix, now, f[6], f[7], id, f[8], '{"id":' .. cjson.encode(id) .. ',"error":' .. cjson.encode(reason) .. '}', 'dead') end
      record(k[6], k[7], {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'token', token, 'reason', reason})
      notifyEnded(k[6], k[7], queue, id, 'dead', tostring(now), f[9], f[10], f[5] or '0', 'error', cjson.encode({message = reason}))
      dead = dead + 1
    else
      redis.call('HSET', jk, 'state', 'ready', 'token', '', 'requeued', 'stalled: lease expired (' .. stalls .. ')')
      putReady(k[2], jk, id, true, f[2] or false, f[3], f[4])
      record(k[6], k[7], {'type', 'stalled', 'id', id, 'queue', queue, 'at', now, 'token', token, 'stalls', stalls})
      requeued = requeued + 1
    end
  end
  if requeued > 0 then wake(k[5]) end

  local workers = redis.call('HGETALL', k[10])
  local staleBefore = now - tonumber(workerStaleMs)
  for i = 1, #workers, 2 do
    local ok, info = pcall(cjson.decode, workers[i + 1])
    if not ok or type(info) ~= 'table' or (tonumber(info.seen) or 0) < staleBefore then
      redis.call('HDEL', k[10], workers[i])
    end
  end
  return {requeued, dead, 0}
end
