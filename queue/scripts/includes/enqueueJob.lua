--- @include "keys"
--- @include "record"
--- @include "readyLine"
--- @include "parkedData"
--- @include "groups"

-- Write one new job record and put it in line: ready, or delayed when `delay` > 0. `keys`:
-- ready, delayed, counts, outbox, meta, seq (the queue's and its pipeline's). `extra`: more
-- record fields ({} for none). Returns true when the job went to ready (the caller wakes a
-- consumer once per call). Numbers become text once (`keys.at`, the call's time, is kept in
-- `keys` for the call's next job): Lua formats a number with sprintf each time it is an argument.
-- The record holds only what differs from a default (docs/protocol.md, "Job record fields"): no
-- `id` (the key names it), no zero counters, no zero priority or timeout, no empty key or hash —
-- every field costs a waiting job bytes, and a field past hash-max-listpack-value would turn the
-- whole hash into a hashtable. A job of priority 0 waits in the queue's line (readyLine.lua) and
-- needs no `score` either, and its data past 64 B waits in its own key (parkedData.lua).
-- `group` (nil: none): the job's group; it waits in its group's line (groups.lua). `recorded`
-- (nil: none): more fields for the outbox only (a flow job's flow and parents, for the records).
local function enqueueJob(keys, jobPrefix, queue, now, id, data, priority, delay, attempts, timeout, idemKey, contentHash, extra, group, recorded)
  if not keys.at then keys.at = tostring(now) end
  local optional = extra
  local score
  -- A delayed job keeps a score too: a worker of the previous layout may promote it (docs/protocol.md, "Layout versions").
  if priority ~= 0 or delay > 0 then
    -- Higher priority sorts first; a sequence keeps FIFO order within one priority.
    local seq = redis.call('INCR', keys.seq)
    -- (%.17g as Redis formats a number argument: a score has up to 16 digits, tostring keeps 14)
    score = string.format('%.17g', (1000 - priority) * 4398046511104 + seq)
    if priority ~= 0 then optional[#optional + 1] = 'priority'; optional[#optional + 1] = priority end
    optional[#optional + 1] = 'score'; optional[#optional + 1] = score
  end
  if timeout ~= '0' then optional[#optional + 1] = 'timeout'; optional[#optional + 1] = timeout end
  if idemKey ~= '' then optional[#optional + 1] = 'idempotencyKey'; optional[#optional + 1] = idemKey end
  if contentHash ~= '' then optional[#optional + 1] = 'contentHash'; optional[#optional + 1] = contentHash end
  if group then optional[#optional + 1] = 'group'; optional[#optional + 1] = group end
  local jk = jobKey(jobPrefix, id)
  if #data > PARK_DATA_BYTES and not score then
    -- (parkedData.lua: the record stays a listpack; only in the line, where a worker of the
    -- previous layout never looks)
    redis.call('SET', dataKeyOf(jk, id), data)
  else
    optional[#optional + 1] = 'data'; optional[#optional + 1] = data
  end
  redis.call('HSET', jk, 'queue', queue, 'attempts', attempts,
    'createdAt', keys.at, 'state', delay > 0 and 'delayed' or 'ready', unpack(optional))
  if delay > 0 then
    redis.call('ZADD', keys.delayed, now + delay, id)
  elseif group then
    groupPutReady(queuePrefixOfReady(keys.ready), group, id, false, priority ~= 0, score)
  elseif priority ~= 0 then
    redis.call('ZADD', keys.ready, score, id)
  else
    redis.call('RPUSH', keys.line, id)
  end
  redis.call('HINCRBY', keys.counts, 'enqueued', 1)
  local fields = {'type', 'enqueued', 'id', id, 'queue', queue, 'at', keys.at, 'attempts', attempts}
  if delay > 0 then
    fields[#fields + 1] = 'due'
    fields[#fields + 1] = now + delay
  end
  -- The key is searchable in the records after its Redis key expires.
  if idemKey ~= '' then
    fields[#fields + 1] = 'key'
    fields[#fields + 1] = idemKey
  end
  local eventsN = #fields
  -- The records keep the group (outbox only): a tenant's token still finds the job after Redis let it go.
  if group then
    fields[#fields + 1] = 'group'
    fields[#fields + 1] = group
  end
  if recorded then
    for i = 1, #recorded do fields[#fields + 1] = recorded[i] end
  end
  fields[#fields + 1] = 'data' -- last: see record()
  fields[#fields + 1] = data
  record(keys.outbox, keys.meta, fields, eventsN)
  return delay <= 0
end
