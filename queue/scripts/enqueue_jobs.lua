-- Enqueue one or more jobs atomically (ready, or delayed when they have a delay).
-- KEYS: 1 ready, 2 delayed, 3 counts, 4 wake, 5 outbox, 6 meta, 7 seq, 8 contract (`<Q>line` and
--       `<Q>lineStale` are named from 1, see includes/readyLine.lua)
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, idempotencyPrefix, queue, now
--       (ms), maxPayloadBytes, idempotencyTtlSeconds, jobFields (the names of the per-job values
--       this call sends, a list: `id`, `data` first, then any of the optional fields below; one no
--       job of the call has is left out), optional contract (the hash of the queue's contract the
--       caller checked the jobs against; left out = none: when it is not the hash in force
--       (`<Q>contract` field hash, '' when none) ERR_CONTRACT_CHANGED <hash in force>, nothing
--       written; the caller re-reads the contract, checks again and retries); then from ARGV 2
--       per job its values in jobFields' order ('' in an optional one: its default). The names
--       are resolved once per call, no decode per job. A call record that is not a JSON object
--       or lacks a field, an unknown, repeated or misplaced job field, a count of values that is
--       not whole jobs, or fewer than 8 KEYS: ERR_INVALID_RECORD naming it, nothing written.
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
-- Returns name/value pairs ids and codes, one of each per job in order: its id and created (1),
-- duplicate (0) or replaced (2: a debounce gave the waiting job with its key this job's data;
-- the id is that job's).
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/record"
--- @include "includes/wake"
--- @include "includes/enqueueJob"
--- @include "includes/jobOptions"

local WHAT = 'enqueue_jobs call'
-- (the jobs' values start here, after the call's record)
local FIRST = 2
local OPTIONAL = {priority = true, delayMs = true, attempts = true, timeoutMs = true, idempotencyKey = true,
  contentHash = true, trace = true, group = true, dedupe = true, uses = true, task = true, notify = true}

local call, bad = wireRecord(WHAT, ARGV[1])
bad = bad or wireRequire(WHAT, call, {'jobPrefix', 'string', 'idempotencyPrefix', 'string', 'queue', 'string',
  'now', 'number', 'maxPayloadBytes', 'number', 'idempotencyTtlSeconds', 'number', 'jobFields', 'table'})
bad = bad or wireOptional(WHAT, call, {'contract', 'string'})
if bad then return redis.error_reply(bad) end
local jobPrefix, idemPrefix, queue = call.jobPrefix, call.idempotencyPrefix, call.queue
local now, maxBytes, idemTtl = call.now, call.maxPayloadBytes, call.idempotencyTtlSeconds

-- The record's jobFields, once per call: each job field's offset from a job's first value (nil:
-- not sent by this call) and the number of values per job; or nil and the error reply's text.
local function fieldOffsets(names, nValues)
  local at, width = {}, #names
  for k = 1, width do
    local name = names[k]
    if type(name) ~= 'string' or at[name] or not (OPTIONAL[name] or (name == 'id' and k == 1) or (name == 'data' and k == 2)) then
      return nil, nil, 'ERR_INVALID_RECORD ' .. WHAT .. ': jobFields: unknown, repeated or misplaced job field ' ..
        tostring(name) .. ' at ' .. k .. ' (id, data first)'
    end
    at[name] = k - 1
  end
  if width < 2 then
    return nil, nil, 'ERR_INVALID_RECORD ' .. WHAT .. ': jobFields must name id and data first'
  end
  if nValues % width ~= 0 then
    return nil, nil, 'ERR_INVALID_RECORD ' .. WHAT .. ': ' .. nValues .. ' values after the call record are not whole jobs of ' ..
      width .. ' (' .. table.concat(names, ',') .. ')'
  end
  return at, width
end

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

-- Every job's task name and notify before anything is written (the task grammar is
-- queue/contracts.ts TASK_NAME_PATTERN's). Returns an error reply's text, or nil.
local function checkAll(at, width)
  if at.task then
    for i = FIRST, #ARGV, width do
      local task = ARGV[i + at.task]
      if task ~= '' and (#task > 100 or not string.match(task, '^[%w][%w%._%-]*$')) then
        return 'ERR_INVALID_TASK job ' .. ARGV[i] .. ': a task name is 1..100 characters of A-Z a-z 0-9 . _ - starting with a letter or digit, got ' .. string.sub(task, 1, 120)
      end
    end
  end
  if at.notify then
    for i = FIRST, #ARGV, width do
      local text = ARGV[i + at.notify]
      if text ~= '' then
        local _, err = notifyField('job ' .. ARGV[i], text)
        if err then return err end
      end
    end
  end
  return nil
end

-- The job at `i`'s group and the record fields beyond the usual (trace, task, notify, uses): a job
-- with uses and no group joins its resources' implicit group. Returns (group, extra) or (nil, nil,
-- error text).
local function groupAndExtra(at, i, id)
  local group = groupOf(field(i, at.group, ''))
  local trace = field(i, at.trace, '')
  local extra = trace ~= '' and {'trace', trace} or {}
  local task = field(i, at.task, '')
  if task ~= '' then
    extra[#extra + 1] = 'task'
    extra[#extra + 1] = task
  end
  local notify = field(i, at.notify, '')
  if notify ~= '' then
    extra[#extra + 1] = 'notify'
    extra[#extra + 1] = notifyField('job ' .. id, notify)
  end
  local uses = field(i, at.uses, '')
  if uses ~= '' then
    local err
    group, err = usesGroup('job ' .. id, uses, group)
    if not group then return nil, nil, err end
    extra[#extra + 1] = 'uses'
    extra[#extra + 1] = uses
  end
  if group and #group > GROUP_MAX_BYTES then
    return nil, nil, 'ERR_INVALID_GROUP job ' .. id .. ': group is ' .. #group .. ' bytes, limit ' .. GROUP_MAX_BYTES
  end
  return group, extra
end

-- Enqueues the job whose values start at ARGV[i], unless its id, idempotency key or dedupe key
-- names a job already. Returns (id, code: 1 created, 0 existing, 2 replaced, whether it woke a
-- consumer's queue), or (nil, error text); jobs before it stay written.
local function enqueueOne(keys, at, i)
  local id, data = ARGV[i], ARGV[i + 1]
  local priority = tonumber(field(i, at.priority, 0))
  local delay = tonumber(field(i, at.delayMs, 0))
  local attempts, timeout = field(i, at.attempts, '3'), field(i, at.timeoutMs, '0')
  local idemKey, contentHash = field(i, at.idempotencyKey, ''), field(i, at.contentHash, '')
  if #data > maxBytes then
    return nil, 'ERR_PAYLOAD_TOO_LARGE job ' .. id .. ' is ' .. #data .. ' bytes, limit ' .. maxBytes
  end
  local group, extra, err = groupAndExtra(at, i, id)
  if err then return nil, err end
  local mode, window, ddKey = nil, nil, nil
  local dedupeSpec = field(i, at.dedupe, '')
  if dedupeSpec ~= '' then
    mode, window, ddKey = string.match(dedupeSpec, '^(%a+):(%d+):(.+)$')
    window = tonumber(window)
    if (mode ~= 'debounce' and mode ~= 'throttle') or not window or window < 1 then
      return nil, 'ERR_INVALID_DEDUPE job ' .. id .. ': dedupe must be debounce|throttle:<windowMs>:<key>, got ' .. dedupeSpec
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
  if replaced then return existing, 2, false end
  if existing then return existing, 0, false end
  if idemKey ~= '' then redis.call('SET', idemPrefix .. idemKey, id, 'EX', idemTtl) end
  local woke = enqueueJob(keys, jobPrefix, queue, now, id, data, priority, delay, attempts, timeout, idemKey, contentHash, extra, group)
  return id, 1, woke
end

if not KEYS[8] then
  return redis.error_reply('ERR_INVALID_RECORD ' .. WHAT .. ': 8 KEYS wanted, the 8th <Q>contract, got ' .. #KEYS .. ' (docs/protocol.md, "Enqueueing from another language")')
end
local at, width
at, width, bad = fieldOffsets(call.jobFields, #ARGV - 1)
if bad then return redis.error_reply(bad) end
local inForce = redis.call('HGET', KEYS[8], 'hash') or ''
if inForce ~= (call.contract or '') then
  return redis.error_reply('ERR_CONTRACT_CHANGED ' .. inForce)
end
bad = checkAll(at, width)
if bad then return redis.error_reply(bad) end
local keys = {ready = KEYS[1], line = lineKeyOf(KEYS[1]), delayed = KEYS[2], counts = KEYS[3], outbox = KEYS[5], meta = KEYS[6], seq = KEYS[7]}
local ids, codes = {}, {}
local woke, created = false, false
for i = FIRST, #ARGV, width do
  local id, code, wokeOne = enqueueOne(keys, at, i)
  if not id then return redis.error_reply(code) end
  ids[#ids + 1] = id
  codes[#codes + 1] = code
  woke = woke or wokeOne
  created = created or code == 1
end
-- (a created job has read `<P>meta` for its record: the fence costs no read of its own)
if created then keepLayoutFence(keys.meta, queue) end
if woke then wake(KEYS[4]) end
return {'ids', ids, 'codes', codes}
