--- @include "keys"
--- @include "wake"
--- @include "record"
--- @include "readyLine"

-- Fan-in. enqueueJoin enqueues a parent's join job with every child's outcome, in child order,
-- and removes the fan-in record (so it happens once). A flow job's join carries its flow fields:
-- the flow job ends when its join does, with the join's result or error.
local function enqueueJoin(jobPrefix, parent, now)
  local base = pipelineBase(jobPrefix)
  local fk = base .. 'fanin:' .. parent
  local f = redis.call('HMGET', fk, 'total', 'join', 'priority', 'attempts', 'trace')
  local total = tonumber(f[1])
  local results = {}
  -- The join's trace context: the fan-out's, and a `link <traceparent>` line per traced child.
  local trace = f[5] and f[5] ~= '' and {f[5]} or nil
  for i = 1, total do
    results[i] = redis.call('HGET', fk, 'r:' .. parent .. ':' .. i) or 'null'
    local link = trace and redis.call('HGET', fk, 'l:' .. parent .. ':' .. i)
    if link then trace[#trace + 1] = 'link ' .. link end
  end
  local joinQueue = f[2]
  local joinId = parent .. ':join'
  local data = '{"parent":' .. cjson.encode(parent) .. ',"results":[' .. table.concat(results, ',') .. ']}'
  local qk = queueKeyPrefix(base, joinQueue)
  local jk = jobPrefix .. joinId
  redis.call('HSET', jk, 'queue', joinQueue, 'data', data, 'attempts', f[4], 'createdAt', now, 'state', 'ready', 'joinOf', parent)
  if trace then redis.call('HSET', jk, 'trace', table.concat(trace, '\n')) end
  -- A flow job that fanned out ends with its join (docs/flows.md): the join takes its place.
  local pf = redis.call('HMGET', jobPrefix .. parent, 'flow', 'flowKey', 'dependents')
  if pf[1] then redis.call('HSET', jk, 'flow', pf[1], 'flowKey', pf[2] or '', 'dependents', pf[3] or '') end
  local priority = tonumber(f[3]) or 0
  if priority ~= 0 then
    local score = (1000 - priority) * 4398046511104 + redis.call('INCR', base .. 'seq')
    redis.call('HSET', jk, 'priority', f[3], 'score', score)
    redis.call('ZADD', qk .. 'ready', score, joinId)
  else
    redis.call('RPUSH', qk .. 'line', joinId)
  end
  redis.call('HINCRBY', qk .. 'counts', 'enqueued', 1)
  wake(qk .. 'wake')
  redis.call('DEL', fk)
  if redis.call('EXISTS', jobPrefix .. parent) == 1 then redis.call('HSET', jobPrefix .. parent, 'state', 'joined') end
  record(base .. 'outbox', base .. 'meta', {'type', 'enqueued', 'id', joinId, 'queue', joinQueue, 'at', now, 'from', 'fan-in', 'attempts', f[4], 'data', data})
end

-- A child job (created by fan_out.lua) has finished: completed at its last stage or
-- dead-lettered. Its outcome (a JSON object text) is stored once — HSETNX makes a repeated
-- finish a no-op — and the child that finishes last enqueues the join, so it runs exactly once.
-- `parent`, `trace`: the job's parent and trace fields when the caller has read them already
-- (false: none). The child's trace context (its traceparent) is kept for the join's links.
local function finishChild(jobPrefix, jk, id, outcome, now, parent, trace)
  if parent == nil then
    local f = redis.call('HMGET', jk, 'parent', 'trace')
    parent, trace = f[1], f[2]
  end
  if not parent or parent == '' then return end
  local fk = pipelineBase(jobPrefix) .. 'fanin:' .. parent
  if redis.call('EXISTS', fk) == 0 then return end
  if redis.call('HSETNX', fk, 'r:' .. id, outcome) == 0 then return end
  if trace and trace ~= '' then redis.call('HSET', fk, 'l:' .. id, string.match(trace, '^[^\n]*')) end
  local done = redis.call('HINCRBY', fk, 'done', 1)
  if done >= tonumber(redis.call('HGET', fk, 'total')) then enqueueJoin(jobPrefix, parent, now) end
end
