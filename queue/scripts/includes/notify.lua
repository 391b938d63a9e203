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
-- Whether the pool wants `state` and the job's own URL for it (nil: none).
local function notifyWanted(metaKey, queue, state, jobNotify)
  local meta = metaFields[metaKey .. ' ' .. queue] or readMeta(metaKey, queue)
  local pool = notifyWants(meta[6], state)
  local url
  if jobNotify and jobNotify ~= '' then
    local events, u = string.match(jobNotify, '^(%S*) (.+)$')
    if notifyWants(events, state) then url = u end
  end
  return pool, url
end
local function notifyEnded(outboxKey, metaKey, queue, id, state, at, jobNotify, createdAt, attempts, outcome, outcomeJson)
  local pool, url = notifyWanted(metaKey, queue, state, jobNotify)
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

-- The jobs a settle call completes go out as one entry (the events stream's batch form, record.lua
-- appendBatchEvent: `n`, shared `queue state at pool`, lists `id[] createdAt[] attempts[] url[]
-- result[]`, url '' for none), not one XADD each; a lone job, or a value holding the list
-- separator, as per-job entries.
local function tallyNotifyCompleted(tally, outboxKey, metaKey, queue, id, jobNotify, createdAt, attempts, result)
  local pool, url = notifyWanted(metaKey, queue, 'completed', jobNotify)
  if not pool and not url then return end
  local nt = tally.notify
  if not nt then
    nt = {key = notifyKeyOf(outboxKey), queue = queue, pool = pool and '1' or '0', ids = {}, created = {}, attempts = {}, urls = {}, results = {}}
    tally.notify = nt
  end
  local k = #nt.ids + 1
  nt.ids[k], nt.created[k], nt.attempts[k], nt.urls[k], nt.results[k] = id, createdAt or '', attempts, url or '', result
end
local function flushNotifyCompleted(tally)
  local nt = tally.notify
  if not nt then return end
  tally.notify = nil
  local n = #nt.ids
  local lists = {nt.ids, nt.created, nt.attempts, nt.urls, nt.results}
  local ok = n > 1
  for i = 1, #lists do ok = ok and joinable(lists[i]) end
  if ok then
    local f = {'n', tostring(n), 'queue', nt.queue, 'state', 'completed', 'at', tally.at, 'pool', nt.pool,
      'id[]', table.concat(nt.ids, LIST_SEP), 'createdAt[]', table.concat(nt.created, LIST_SEP),
      'attempts[]', table.concat(nt.attempts, LIST_SEP), 'url[]', table.concat(nt.urls, LIST_SEP),
      'result[]', table.concat(nt.results, LIST_SEP)}
    redis.call('XADD', nt.key, 'MAXLEN', '~', NOTIFY_MAXLEN, '*', unpack(f))
    return
  end
  for k = 1, n do
    local f = {'id', nt.ids[k], 'queue', nt.queue, 'state', 'completed', 'at', tally.at, 'createdAt', nt.created[k],
      'attempts', nt.attempts[k], 'pool', nt.pool}
    if nt.urls[k] ~= '' then
      f[#f + 1] = 'url'
      f[#f + 1] = nt.urls[k]
    end
    f[#f + 1] = 'result'
    f[#f + 1] = nt.results[k]
    redis.call('XADD', nt.key, 'MAXLEN', '~', NOTIFY_MAXLEN, '*', unpack(f))
  end
end
