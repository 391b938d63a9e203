--- @include "readyLine"

-- One queue's counts for scaling (backlog_counts.lua), O(1): {ready (the sorted set and the
-- line, readyLine.lua), delayed, dueDelayed, inflight, dead, completed, oldestReadyCreatedAt};
-- the last is 0 when nothing is ready (or the head job has no createdAt); then budget, the
-- waiting jobs no resource key can pay for now (not in ready).
local function backlogCounts(readyKey, delayedKey, inflightKey, deadKey, countsKey, now, jobPrefix)
  local ready, budget = readyCount(readyKey)
  local delayed = redis.call('ZCARD', delayedKey)
  local due = 0
  if delayed > 0 then due = redis.call('ZCOUNT', delayedKey, '-inf', now) end
  local inflight = redis.call('ZCARD', inflightKey)
  local dead = redis.call('ZCARD', deadKey)
  local completed = tonumber(redis.call('HGET', countsKey, 'completed') or 0) or 0
  local oldest = 0
  if ready > 0 then
    local head = readyHead(readyKey, jobPrefix)
    if head then oldest = tonumber(redis.call('HGET', jobPrefix .. head, 'createdAt') or 0) or 0 end
  end
  return {ready, delayed, due, inflight, dead, completed, oldest, budget}
end
