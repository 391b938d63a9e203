--- @include "record"

-- Completion notifications (docs/notifications.md): a job that ends completed, dead or cancelled
-- gets an entry in the pipeline's `notify` stream, in the same script as its settle, when its
-- pool asks for that event (`notify:<queue>` in meta, read by record.lua's one HMGET) or the job
-- does (its `notify` field, `<events> <url>`, read with the job's other fields). Any other job
-- costs no command here.
local NOTIFY_MAXLEN = '1000000'
local function notifyKeyOf(outboxKey)
  return string.sub(outboxKey, 1, #outboxKey - 6) .. 'notify'
end
-- Whether the comma-separated `events` name `state`.
local function notifyWants(events, state)
  if not events or events == '' then return false end
  return string.find(',' .. events .. ',', ',' .. state .. ',', 1, true) ~= nil
end
-- `jobNotify`: the job's `notify` field (false when none); `outcome`: 'result' or 'error' and its
-- JSON text (or nil). The entry names the destinations: `pool` 1 (the pool's URL, known to its
-- workers) and/or `url` (the job's own).
local function notifyEnded(outboxKey, metaKey, queue, id, state, at, jobNotify, createdAt, attempts, outcome, outcomeJson)
  local meta = metaFields[metaKey .. ' ' .. queue] or readMeta(metaKey, queue)
  local pool = notifyWants(meta[6], state)
  local url
  if jobNotify and jobNotify ~= '' then
    local events, u = string.match(jobNotify, '^(%S*) (.+)$')
    if notifyWants(events, state) then url = u end
  end
  if not pool and not url then return end
  local f = {'id', id, 'queue', queue, 'state', state, 'at', at, 'createdAt', createdAt or '',
    'attempts', attempts or '0', 'pool', pool and '1' or '0'}
  if url then
    f[#f + 1] = 'url'
    f[#f + 1] = url
  end
  if outcome then
    f[#f + 1] = outcome
    f[#f + 1] = outcomeJson
  end
  redis.call('XADD', notifyKeyOf(outboxKey), 'MAXLEN', '~', NOTIFY_MAXLEN, '*', unpack(f))
end
