-- Moves a pipeline's layout in force forward (queue/layout.ts, finalizeLayout), in one step:
-- `<P>layout` and its mirror `<P>meta` field `layout`, which every claim reads (control.lua).
-- KEYS: 1 <P>layout, 2 <P>meta
-- ARGV: 1 the call's record (JSON, includes/wire.lua): to (the layout to move to), firstVersion
--       (the first release that reads it), finalizedAt (ms), finalizedBy; 2… the pipeline's
--       queues the caller knows of (those with a control field in `<P>meta` are found here too).
--       A record that is not a JSON object or lacks a field: ERR_INVALID_RECORD naming it,
--       nothing written.
-- Moving from layout 1 to 2 or later fences every queue: `hold:<q>` takes this release's pause
-- from `paused:<q>` (a pause set at layout 1 holds on), then `paused:<q>` = '1', which the release
-- before layouts honours by claiming nothing (docs/protocol.md, "The layout in force").
-- Never moves back. Returns name/value pairs previous (the layout in force before the call).
--- @include "includes/wire"

local call, bad = wireRecord('layout_finalize call', ARGV[1])
bad = bad or wireRequire('layout_finalize call', call,
  {'to', 'number', 'firstVersion', 'string', 'finalizedAt', 'number', 'finalizedBy', 'string'})
if not bad and (call.to < 1 or call.to ~= math.floor(call.to)) then
  bad = 'ERR_INVALID_RECORD layout_finalize call: field to must be a positive integer, got ' .. call.to
end
if bad then return redis.error_reply(bad) end
local to = call.to
local from = tonumber(redis.call('HGET', KEYS[1], 'inForce')) or 1
if from >= to then return {'previous', from} end
if from < 2 and to >= 2 then
  local seen, queues = {}, {}
  local function add(q)
    if q ~= '' and not seen[q] then
      seen[q] = true
      queues[#queues + 1] = q
    end
  end
  for i = 2, #ARGV do add(ARGV[i]) end
  local CONTROL = {paused = true, hold = true, rate = true, rlog = true, groups = true, notify = true}
  for _, f in ipairs(redis.call('HKEYS', KEYS[2])) do
    local kind, q = string.match(f, '^(%a+):(.+)$')
    if kind and CONTROL[kind] then add(q) end
  end
  table.sort(queues)
  for _, q in ipairs(queues) do
    if redis.call('HGET', KEYS[2], 'paused:' .. q) == '1' then
      redis.call('HSET', KEYS[2], 'hold:' .. q, '1', 'paused:' .. q, '1')
    else
      redis.call('HDEL', KEYS[2], 'hold:' .. q)
      redis.call('HSET', KEYS[2], 'paused:' .. q, '1')
    end
  end
end
local layout = string.format('%d', to)
redis.call('HSET', KEYS[1], 'inForce', layout, 'firstVersion', call.firstVersion,
  'finalizedAt', string.format('%d', call.finalizedAt), 'finalizedBy', call.finalizedBy)
redis.call('HSET', KEYS[2], 'layout', layout)
return {'previous', from}
