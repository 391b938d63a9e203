-- Moves a pipeline's layout in force forward (queue/layout.ts, finalizeLayout), in one step:
-- `<P>layout` and its mirror `<P>meta` field `layout`, which every claim reads (control.lua).
-- KEYS: 1 <P>layout, 2 <P>meta
-- ARGV: 1 the layout to move to, 2 the first release that reads it, 3 finalizedAt (ms),
--       4 finalizedBy, then the pipeline's queues the caller knows of (those with a control field
--       in `<P>meta` are found here too)
-- Moving from layout 1 to 2 or later fences every queue: `hold:<q>` takes this release's pause
-- from `paused:<q>` (a pause set at layout 1 holds on), then `paused:<q>` = '1', which the release
-- before layouts honours by claiming nothing (docs/protocol.md, "The layout in force").
-- Never moves back. Returns the layout in force before the call.
local to = tonumber(ARGV[1])
local from = tonumber(redis.call('HGET', KEYS[1], 'inForce')) or 1
if from >= to then return from end
if from < 2 and to >= 2 then
  local seen, queues = {}, {}
  local function add(q)
    if q ~= '' and not seen[q] then
      seen[q] = true
      queues[#queues + 1] = q
    end
  end
  for i = 5, #ARGV do add(ARGV[i]) end
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
redis.call('HSET', KEYS[1], 'inForce', ARGV[1], 'firstVersion', ARGV[2], 'finalizedAt', ARGV[3], 'finalizedBy', ARGV[4])
redis.call('HSET', KEYS[2], 'layout', ARGV[1])
return from
