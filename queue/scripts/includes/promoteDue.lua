--- @include "keys"
--- @include "numbers"
--- @include "malformed"
--- @include "record"
--- @include "readyLine"

-- Move delayed jobs whose time has come to ready (bounded per call): a priority-0 job to the
-- tail of the line, a prioritised one to its score's place (a sequenced group's retry: to the
-- head of its group, groups.lua). Returns the earliest
-- delayed job's due time (-1: none) when nothing was moved — the common case costs one
-- command, and the caller need not look again; nil when it must.
local function promoteDue(jobPrefix, queue, readyKey, delayedKey, deadKey, countsKey, now)
  local first = redis.call('ZRANGE', delayedKey, '0', '0', 'WITHSCORES')
  if not first[2] then return -1 end
  local firstDue = tonumber(first[2])
  if firstDue and firstDue > now then return firstDue end
  local due = redis.call('ZRANGEBYSCORE', delayedKey, '-inf', now, 'LIMIT', 0, 1000)
  for _, id in ipairs(due) do
    local jk = jobKey(jobPrefix, id)
    redis.call('ZREM', delayedKey, id)
    local f = redis.pcall('HMGET', jk, 'queue', 'priority', 'score', 'group', 'holdsGroup')
    local score = (not f.err) and f[1] and (inLine(f[2]) or numericScore(f[3]))
    if score then
      redis.call('HSET', jk, 'state', 'ready')
      -- (a sequenced retry goes back to the head of its group, and only then frees its slot)
      local held = f[5] == '1' and f[4]
      putReady(readyKey, jk, id, held, f[2] or false, f[3], f[4])
      if held then groupHeldReleased(groupQueuePrefix(jobPrefix, queue), held, jk) end
    else
      -- (a sequenced retry's hold ends with it: its group is not blocked by a record nobody can run)
      if not f.err and f[5] == '1' and f[4] then groupLeftRunning(groupQueuePrefix(jobPrefix, queue), f[4]) end
      local reason = notAHash(jk, id) or 'malformed: job record missing or has no numeric score'
      deadLetterRaw(jk, id, deadKey, countsKey, now, reason, queue)
      local base = pipelineBase(jobPrefix)
      record(base .. 'outbox', base .. 'meta', {'type', 'dead', 'id', id, 'queue', queue, 'at', now, 'reason', reason})
    end
  end
  return nil
end
