--- @include "keys"

-- Every transition is appended to the queue's capped event stream (for followers: `conveyor
-- events`, the typed API) and, when a recorder has switched it on, to the pipeline's
-- outbox: a transactional record drained into PostgreSQL. Queues without PostgreSQL never
-- grow the outbox. Both keys share the pipeline's hash tag with `outboxKey`.
-- (as text: Lua would format a number argument with sprintf on every XADD)
local OUTBOX_MAXLEN = '1000000'
local EVENTS_MAXLEN = '10000'
-- Whether the outbox is on, read once per script call (a script records up to a few transitions).
local recordsOn = {}
-- The same read brings the queue's control fields (control.lua) and whether grouped jobs wait
-- (groups.lua, `groups:<queue>`), the events its pool notifies (notify.lua, `notify:<queue>`) and
-- the pipeline's layout in force (`layout`, control.lua) and this release's own pause at layout 2
-- (`hold:<queue>`, control.lua), in the same one command.
local metaFields = {}
-- A script call starts with neither; a Function library (defined once per server, see
-- queue/scripts.ts) keeps them between calls, so each of its functions starts with this.
local function resetCallState()
  recordsOn, metaFields = {}, {}
end
local function readMeta(metaKey, queue)
  local f = redis.call('HMGET', metaKey, 'records', 'paused:' .. queue, 'rate:' .. queue, 'rlog:' .. queue, 'groups:' .. queue, 'notify:' .. queue, 'layout', 'hold:' .. queue)
  recordsOn[metaKey] = f[1] == '1'
  metaFields[metaKey .. ' ' .. queue] = f
  return f
end
-- From layout 2 on `paused:<queue>` is '1' for every queue of the pipeline: the fence the release
-- before layouts (0.1.0) honours, so it claims nothing (docs/protocol.md, "The layout in force").
-- An enqueue puts it on a queue that has none yet, from the read of `<P>meta` it makes anyway.
local function keepLayoutFence(metaKey, queue)
  local f = metaFields[metaKey .. ' ' .. queue] or readMeta(metaKey, queue)
  if (tonumber(f[7]) or 1) >= 2 and f[2] ~= '1' then
    redis.call('HSET', metaKey, 'paused:' .. queue, '1')
    f[2] = '1'
  end
end
local function outboxOn(metaKey, queue)
  if recordsOn[metaKey] == nil then readMeta(metaKey, queue) end
  return recordsOn[metaKey]
end
local function eventsKeyOf(outboxKey, queue)
  return queueKeyPrefix(string.sub(outboxKey, 1, #outboxKey - 6), queue) .. 'events'
end
-- `fields` always start 'type', t, 'id', id, 'queue', q; a transition that carries the job's
-- input has it as the last pair ('data', …). The input can be large: followers of the event
-- stream get ids and outcomes, not payloads; the outbox gets every field. (No field-by-field
-- copy: record runs for most transitions.) recordOutbox is the outbox half alone, for the
-- transitions whose events go out as one batch entry (below). `eventsN` (optional): only the
-- first eventsN fields go to the event stream (fields the records keep but followers need not).
local function recordOutbox(outboxKey, metaKey, fields)
  if outboxOn(metaKey, fields[6]) then
    redis.call('XADD', outboxKey, 'MAXLEN', '~', OUTBOX_MAXLEN, '*', unpack(fields))
  end
end
local function record(outboxKey, metaKey, fields, eventsN)
  local n = #fields
  if eventsN then n = eventsN elseif fields[n - 1] == 'data' then n = n - 2 end
  redis.call('XADD', eventsKeyOf(outboxKey, fields[6]), 'MAXLEN', '~', EVENTS_MAXLEN, '*', unpack(fields, 1, n))
  recordOutbox(outboxKey, metaKey, fields)
end

-- Batch entries (docs/protocol.md, Events): the jobs one call started or completed are one
-- stream entry, not one each — a stream entry is the largest per-job cost left in a batched
-- call. `n` jobs; a field named `x[]` holds the jobs' `x` values in order, joined by LIST_SEP
-- (a control character no job id or JSON text contains); the other fields are shared. A list
-- value that contains LIST_SEP itself (an id or result no Conveyor producer makes) sends the
-- batch as per-job entries instead, so nothing is ever split wrongly.
local LIST_SEP = '\31'
local function joinable(values)
  for i = 1, #values do
    if string.find(values[i], LIST_SEP, 1, true) then return false end
  end
  return true
end
-- `shared`: the fields every job of the batch has, as a flat list; `lists`: {name, values}
-- pairs in the per-job entry's field order, all of length n; `tail`: shared fields written after
-- the lists in the per-job form (keeps that form's field order as it always was).
local function appendBatchEvent(eventsKey, typ, shared, lists, tail)
  local n = #lists[2]
  local ok = n > 1
  for i = 2, #lists, 2 do ok = ok and joinable(lists[i]) end
  if ok then
    local f = {'type', typ, 'n', tostring(n)}
    for i = 1, #shared do f[#f + 1] = shared[i] end
    for i = 1, #lists, 2 do
      f[#f + 1] = lists[i] .. '[]'
      f[#f + 1] = table.concat(lists[i + 1], LIST_SEP)
    end
    for i = 1, #tail do f[#f + 1] = tail[i] end
    redis.call('XADD', eventsKey, 'MAXLEN', '~', EVENTS_MAXLEN, '*', unpack(f))
    return
  end
  -- The per-job form: type, id, shared (queue, at), the other lists, tail.
  for k = 1, n do
    local f = {'type', typ, lists[1], lists[2][k]}
    for i = 1, #shared do f[#f + 1] = shared[i] end
    for i = 3, #lists, 2 do
      f[#f + 1] = lists[i]
      f[#f + 1] = lists[i + 1][k]
    end
    for i = 1, #tail do f[#f + 1] = tail[i] end
    redis.call('XADD', eventsKey, 'MAXLEN', '~', EVENTS_MAXLEN, '*', unpack(f))
  end
end
