-- Enqueue one or more jobs atomically (ready, or delayed when they have a delay).
-- KEYS: 1 ready, 2 delayed, 3 counts, 4 wake, 5 outbox, 6 meta, 7 seq, 8 contract (`<Q>line` and
--       `<Q>lineStale` are named from 1, see includes/readyLine.lua)
-- ARGV: 1 jobPrefix, 2 idempotencyPrefix, 3 queue, 4 now (ms), 5 maxPayloadBytes,
--       6 idempotencyTtlSeconds, 7 the job record's fields this call sends, by name, comma-separated:
--       `id,data` first, then any of the optional fields below (one no job of the call has is left
--       out; '' in a sent field is its default); then per job exactly those values, in that order.
--       Optional fields (docs/protocol.md, "Enqueueing from another language"): priority (0),
--       delayMs (0), attempts (3), timeoutMs (0 = the worker's), idempotencyKey, contentHash, trace
--       (the W3C trace context of the enqueue), group (at most 128 bytes: else ERR_INVALID_GROUP),
--       dedupe (`<debounce|throttle>:<windowMs>:<key>`: else ERR_INVALID_DEDUPE; docs/protocol.md,
--       "Debounce and throttle"), uses (JSON {resource: {unit: amount}}: else ERR_INVALID_USES; a
--       job with uses and no group joins the implicit group `~res:<resources sorted, joined by +>`).
--       task (the job's task name: at most 100 bytes of [A-Za-z0-9._-], starting with a letter or
--       digit: else ERR_INVALID_TASK, nothing written), notify (JSON {url, events}: the job's own
--       completion notification, docs/notifications.md; kept as `notify` = `<events,…> <url>`:
--       else ERR_INVALID_NOTIFY, nothing written).
--       An unknown or repeated field name: ERR_INVALID_FIELDS, nothing written.
--       8 the hash of the queue's contract the caller checked the jobs against ('' = none); when
--       it is not the hash in force (`<Q>contract` field hash, '' when none):
--       ERR_CONTRACT_CHANGED <hash in force>, nothing written (the caller re-reads the contract,
--       checks again and retries). Then from 9 the job values.
-- Returns a flat list: id, created (1), duplicate (0) or replaced (2: a debounce gave the waiting
-- job with its key this job's data; the id is that job's), per job.
--- @include "includes/keys"
--- @include "includes/record"
--- @include "includes/wake"
--- @include "includes/enqueueJob"
--- @include "includes/jobOptions"

local jobPrefix, idemPrefix, queue = ARGV[1], ARGV[2], ARGV[3]
local now = tonumber(ARGV[4])
local maxBytes = tonumber(ARGV[5])
local idemTtl = tonumber(ARGV[6])
-- Each field's offset from a job's first value (nil: not sent by this call).
local at, width = {}, 0
local OPTIONAL = {priority = true, delayMs = true, attempts = true, timeoutMs = true, idempotencyKey = true,
  contentHash = true, trace = true, group = true, dedupe = true, uses = true, task = true, notify = true}
if not KEYS[8] then
  return redis.error_reply('ERR_INVALID_FIELDS enqueue_jobs takes 8 keys, the 8th <Q>contract, and the contract hash as ARGV 8 (docs/protocol.md, "Enqueueing from another language")')
end
local inForce = redis.call('HGET', KEYS[8], 'hash') or ''
if inForce ~= ARGV[8] then
  return redis.error_reply('ERR_CONTRACT_CHANGED ' .. inForce)
end
for name in string.gmatch(ARGV[7], '[^,]+') do
  if at[name] or not (OPTIONAL[name] or (name == 'id' and width == 0) or (name == 'data' and width == 1)) then
    return redis.error_reply('ERR_INVALID_FIELDS unknown, repeated or misplaced job field ' .. name .. ' in ' .. ARGV[7] .. ' (id,data first)')
  end
  at[name] = width
  width = width + 1
end
if width < 2 or (#ARGV - 8) % width ~= 0 then
  return redis.error_reply('ERR_INVALID_FIELDS ' .. (#ARGV - 8) .. ' values for jobs of ' .. width .. ' fields (' .. ARGV[7] .. ')')
end
local PRIORITY, DELAY, ATTEMPTS, TIMEOUT = at.priority, at.delayMs, at.attempts, at.timeoutMs
local IDEM, HASH, TRACE, GROUP, DEDUPE, USES = at.idempotencyKey, at.contentHash, at.trace, at.group, at.dedupe, at.uses
local TASK, NOTIFY = at.task, at.notify
-- The value of the field at offset `k` of the job at `i`, or `default` when not sent or ''.
local function field(i, k, default)
  if not k then return default end
  local v = ARGV[i + k]
  if v == '' then return default end
  return v
end
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
-- Every job's task name before anything is written (the grammar of queue/contracts.ts TASK_NAME_PATTERN).
if TASK then
  for i = 9, #ARGV, width do
    local task = ARGV[i + TASK]
    if task ~= '' and (#task > 100 or not string.match(task, '^[%w][%w%._%-]*$')) then
      return redis.error_reply('ERR_INVALID_TASK job ' .. ARGV[i] .. ': a task name is 1..100 characters of A-Z a-z 0-9 . _ - starting with a letter or digit, got ' .. string.sub(task, 1, 120))
    end
  end
end
if NOTIFY then
  for i = 9, #ARGV, width do
    local text = ARGV[i + NOTIFY]
    if text ~= '' then
      local _, err = notifyField('job ' .. ARGV[i], text)
      if err then return redis.error_reply(err) end
    end
  end
end
local keys = {ready = KEYS[1], line = lineKeyOf(KEYS[1]), delayed = KEYS[2], counts = KEYS[3], outbox = KEYS[5], meta = KEYS[6], seq = KEYS[7]}
local out = {}
local woke = false
for i = 9, #ARGV, width do
  local id, data = ARGV[i], ARGV[i + 1]
  local priority = tonumber(field(i, PRIORITY, 0))
  local delay = tonumber(field(i, DELAY, 0))
  local attempts, timeout = field(i, ATTEMPTS, '3'), field(i, TIMEOUT, '0')
  local idemKey, contentHash, trace = field(i, IDEM, ''), field(i, HASH, ''), field(i, TRACE, '')
  if #data > maxBytes then
    return redis.error_reply('ERR_PAYLOAD_TOO_LARGE job ' .. id .. ' is ' .. #data .. ' bytes, limit ' .. maxBytes)
  end
  local group = groupOf(field(i, GROUP, ''))
  local extra = trace ~= '' and {'trace', trace} or {}
  local task = field(i, TASK, '')
  if task ~= '' then
    extra[#extra + 1] = 'task'
    extra[#extra + 1] = task
  end
  local notify = field(i, NOTIFY, '')
  if notify ~= '' then
    extra[#extra + 1] = 'notify'
    extra[#extra + 1] = notifyField('job ' .. id, notify)
  end
  local uses = field(i, USES, '')
  if uses ~= '' then
    local err
    group, err = usesGroup('job ' .. id, uses, group)
    if not group then return redis.error_reply(err) end
    extra[#extra + 1] = 'uses'
    extra[#extra + 1] = uses
  end
  if group and #group > GROUP_MAX_BYTES then
    return redis.error_reply('ERR_INVALID_GROUP job ' .. id .. ': group is ' .. #group .. ' bytes, limit ' .. GROUP_MAX_BYTES)
  end
  local mode, window, ddKey = nil, nil, nil
  local dedupeSpec = field(i, DEDUPE, '')
  if dedupeSpec ~= '' then
    mode, window, ddKey = string.match(dedupeSpec, '^(%a+):(%d+):(.+)$')
    window = tonumber(window)
    if (mode ~= 'debounce' and mode ~= 'throttle') or not window or window < 1 then
      return redis.error_reply('ERR_INVALID_DEDUPE job ' .. id .. ': dedupe must be debounce|throttle:<windowMs>:<key>, got ' .. dedupeSpec)
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
