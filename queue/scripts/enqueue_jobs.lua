-- Enqueue one or more jobs atomically (ready, or delayed when they have a delay).
-- KEYS: 1 ready, 2 delayed, 3 counts, 4 wake, 5 outbox, 6 meta, 7 seq (`<Q>line` and
--       `<Q>lineStale` are named from 1, see includes/readyLine.lua)
-- ARGV: 1 jobPrefix, 2 idempotencyPrefix, 3 queue, 4 now (ms), 5 maxPayloadBytes,
--       6 idempotencyTtlSeconds, then per job 9 fields:
--       id, data, priority, delayMs, attempts, timeoutMs, idempotencyKey ('' = none), contentHash,
--       trace (the W3C trace context of the enqueue, see docs/protocol.md; '' = none);
--       when ARGV 7 is `+group`, the jobs start at 8 and each has a 10th field, group ('' = none,
--       at most 128 bytes: else ERR_INVALID_GROUP); when it is `+dedupe`, `+uses` or
--       `+dedupe+uses`, they start at 8 and each has a 10th, group, then in that order: dedupe,
--       `<debounce|throttle>:<windowMs>:<key>` ('' = none; else ERR_INVALID_DEDUPE), see
--       docs/protocol.md, "Debounce and throttle"; uses ('' = none; JSON {resource: {unit:
--       amount}}: else ERR_INVALID_USES), and a job with uses and no group joins the implicit
--       group `~res:<resources sorted, joined by +>` (docs/protocol.md, "Resources")
-- Returns a flat list: id, created (1), duplicate (0) or replaced (2: a debounce gave the waiting
-- job with its key this job's data; the id is that job's), per job.
--- @include "includes/keys"
--- @include "includes/record"
--- @include "includes/wake"
--- @include "includes/enqueueJob"

local jobPrefix, idemPrefix, queue = ARGV[1], ARGV[2], ARGV[3]
local now = tonumber(ARGV[4])
local maxBytes = tonumber(ARGV[5])
local idemTtl = tonumber(ARGV[6])
local FIELDS, first = 9, 7
-- (the offsets of a job's dedupe and uses fields after its id, when the marker sends them)
local DEDUPE_AT, USES_AT = nil, nil
if ARGV[7] == '+group' then FIELDS, first = 10, 8
elseif ARGV[7] == '+dedupe' then FIELDS, first, DEDUPE_AT = 11, 8, 10
elseif ARGV[7] == '+uses' then FIELDS, first, USES_AT = 11, 8, 10
elseif ARGV[7] == '+dedupe+uses' then FIELDS, first, DEDUPE_AT, USES_AT = 12, 8, 10, 11 end
-- Debounce and throttle (docs/protocol.md, "Debounce and throttle"): `<Q>dd:<key>` names the job
-- that holds the key for `window` ms. Throttle: the first job of a window takes the key (SET NX),
-- the rest report it `existing`. Debounce: while the key names a job still waiting for its first
-- attempt (delayed, in this queue), that job takes the new data and waits `window` again (its id
-- and other fields stay); else the new job is created, delayed by `window`, and takes the key.
-- Returns (existing id or false, replaced).
local function dedupeKeyOf(readyKey, key)
  return string.sub(readyKey, 1, #readyKey - 5) .. 'dd:' .. key
end
local function dedupe(ddk, mode, window, id, data)
  if mode == 'throttle' then
    if redis.call('SET', ddk, id, 'NX', 'PX', window) then return false, false end
    return redis.call('GET', ddk), false
  end
  local held = redis.call('GET', ddk)
  if held then
    local hk = jobKey(jobPrefix, held)
    local f = redis.pcall('HMGET', hk, 'state', 'queue', 'attemptsMade')
    if not f.err and f[1] == 'delayed' and f[2] == queue and (tonumber(f[3]) or 0) == 0
        and redis.call('ZSCORE', KEYS[2], held) then
      redis.call('ZADD', KEYS[2], now + window, held)
      redis.call('HSET', hk, 'data', data)
      redis.call('SET', ddk, held, 'PX', window)
      record(KEYS[5], KEYS[6], {'type', 'enqueued', 'id', held, 'queue', queue, 'at', now, 'from', 'debounce', 'due', now + window, 'data', data})
      return held, true
    end
  end
  redis.call('SET', ddk, id, 'PX', window)
  return false, false
end
local keys = {ready = KEYS[1], line = lineKeyOf(KEYS[1]), delayed = KEYS[2], counts = KEYS[3], outbox = KEYS[5], meta = KEYS[6], seq = KEYS[7]}
local out = {}
local woke = false
for i = first, #ARGV, FIELDS do
  local id, data = ARGV[i], ARGV[i + 1]
  local priority = tonumber(ARGV[i + 2])
  local delay = tonumber(ARGV[i + 3])
  local attempts, timeout = ARGV[i + 4], ARGV[i + 5]
  local idemKey, contentHash, trace = ARGV[i + 6], ARGV[i + 7], ARGV[i + 8]
  if #data > maxBytes then
    return redis.error_reply('ERR_PAYLOAD_TOO_LARGE job ' .. id .. ' is ' .. #data .. ' bytes, limit ' .. maxBytes)
  end
  local group = FIELDS >= 10 and groupOf(ARGV[i + 9]) or nil
  local extra = (trace and trace ~= '') and {'trace', trace} or {}
  local uses = USES_AT and ARGV[i + USES_AT] or ''
  if uses ~= '' then
    local ok, decoded = pcall(cjson.decode, uses)
    if not ok or type(decoded) ~= 'table' or next(decoded) == nil then
      return redis.error_reply('ERR_INVALID_USES job ' .. id .. ': uses must be a JSON object {resource: {unit: amount}}')
    end
    if not group then
      local names = {}
      for name in pairs(decoded) do names[#names + 1] = name end
      table.sort(names)
      group = '~res:' .. table.concat(names, '+')
    end
    extra[#extra + 1] = 'uses'
    extra[#extra + 1] = uses
  end
  if group and #group > GROUP_MAX_BYTES then
    return redis.error_reply('ERR_INVALID_GROUP job ' .. id .. ': group is ' .. #group .. ' bytes, limit ' .. GROUP_MAX_BYTES)
  end
  local mode, window, ddKey = nil, nil, nil
  if DEDUPE_AT and ARGV[i + DEDUPE_AT] ~= '' then
    mode, window, ddKey = string.match(ARGV[i + DEDUPE_AT], '^(%a+):(%d+):(.+)$')
    window = tonumber(window)
    if (mode ~= 'debounce' and mode ~= 'throttle') or not window or window < 1 then
      return redis.error_reply('ERR_INVALID_DEDUPE job ' .. id .. ': dedupe must be debounce|throttle:<windowMs>:<key>, got ' .. ARGV[i + DEDUPE_AT])
    end
  end
  local existing = false
  if idemKey ~= '' then
    existing = redis.call('GET', idemPrefix .. idemKey)
  end
  local jk = jobKey(jobPrefix, id)
  if not existing and redis.call('EXISTS', jk) == 1 then existing = id end
  local replaced = false
  if not existing and mode then
    existing, replaced = dedupe(dedupeKeyOf(KEYS[1], ddKey), mode, window, id, data)
    -- (a debounced job waits out the window: the last of a burst runs, `window` after it came)
    if mode == 'debounce' then delay = window end
  end
  if replaced then
    out[#out + 1] = existing
    out[#out + 1] = 2
  elseif existing then
    out[#out + 1] = existing
    out[#out + 1] = 0
  else
    if idemKey ~= '' then redis.call('SET', idemPrefix .. idemKey, id, 'EX', idemTtl) end
    if enqueueJob(keys, jobPrefix, queue, now, id, data, priority, delay, attempts, timeout, idemKey, contentHash, extra, group) then
      woke = true
    end
    out[#out + 1] = id
    out[#out + 1] = 1
  end
end
if woke then wake(KEYS[4]) end
return out
