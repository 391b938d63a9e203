-- The next blocked consumer of a queue whose consumers are running (a claim chaining the
-- wake-up): no pool sleeps there, so no doorbell is looked for.
local function rewake(wakeKey)
  if redis.call('LLEN', wakeKey) == 0 then redis.call('LPUSH', wakeKey, '1') end
end

-- Wake one blocked consumer; it re-wakes the next if work remains (see claim_jobs.lua).
-- A queue whose pool the operator scaled to zero has no consumer to wake: the operator left a
-- doorbell (`<Q>doorbell`, holding a pub/sub channel), rung once here so a worker starts now
-- rather than at the operator's next poll (docs/protocol.md, "Doorbell"). Checked on every wake,
-- not only an empty list's: a token can outlive the workers that would have popped it. A bell
-- `<channel> <n>` (a running latency-mode pool's surge bell) rings only once n jobs wait — the
-- prioritised set, the line and the groups' waiting jobs, stale line entries counted: a surge
-- the pool's slots cannot start within its target, which the operator hears before its next poll.
local function wake(wakeKey)
  rewake(wakeKey)
  local q = string.sub(wakeKey, 1, #wakeKey - 4)
  local bell = q .. 'doorbell'
  local channel = redis.call('GET', bell)
  if not channel then return end
  local space = string.find(channel, ' ', 1, true)
  if space then
    local n = tonumber(string.sub(channel, space + 1)) or 1
    local waiting = redis.call('ZCARD', q .. 'ready') + redis.call('LLEN', q .. 'line')
      + (tonumber(redis.call('HGET', q .. 'gwaiting', '')) or 0)
    if waiting < n then return end
    channel = string.sub(channel, 1, space - 1)
  end
  redis.call('DEL', bell)
  -- (pcall: a caller whose ACL user may not publish on the channel still enqueues; the
  -- operator then sees the job at its next poll)
  redis.pcall('PUBLISH', channel, bell)
end
