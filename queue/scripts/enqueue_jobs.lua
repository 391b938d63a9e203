-- Enqueue one or more jobs atomically (ready, or delayed when they have a delay).
-- KEYS: 1 ready, 2 delayed, 3 counts, 4 wake, 5 outbox, 6 meta, 7 seq (`<Q>line` and
--       `<Q>lineStale` are named from 1, see includes/readyLine.lua)
-- ARGV: 1 jobPrefix, 2 idempotencyPrefix, 3 queue, 4 now (ms), 5 maxPayloadBytes,
--       6 idempotencyTtlSeconds, then per job 9 fields:
--       id, data, priority, delayMs, attempts, timeoutMs, idempotencyKey ('' = none), contentHash,
--       trace (the W3C trace context of the enqueue, see docs/protocol.md; '' = none);
--       when ARGV 7 is `+group`, the jobs start at 8 and each has a 10th field, group ('' = none,
--       at most 128 bytes: else ERR_INVALID_GROUP); when ARGV 7 is `+uses`, each has an 11th,
--       uses ('' = none; JSON {resource: {unit: amount}}: else ERR_INVALID_USES), and a job with
--       uses and no group joins the implicit group `~res:<resources sorted, joined by +>`
--       (docs/protocol.md, "Resources")
-- Returns a flat list: id, created (1) or duplicate (0), per job.
--- @include "includes/keys"
--- @include "includes/record"
--- @include "includes/wake"
--- @include "includes/enqueueJob"

local jobPrefix, idemPrefix, queue = ARGV[1], ARGV[2], ARGV[3]
local now = tonumber(ARGV[4])
local maxBytes = tonumber(ARGV[5])
local idemTtl = tonumber(ARGV[6])
local FIELDS, first = 9, 7
if ARGV[7] == '+group' then FIELDS, first = 10, 8 end
if ARGV[7] == '+uses' then FIELDS, first = 11, 8 end
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
  local uses = FIELDS == 11 and ARGV[i + 10] or ''
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
  local existing = false
  if idemKey ~= '' then
    existing = redis.call('GET', idemPrefix .. idemKey)
  end
  local jk = jobKey(jobPrefix, id)
  if not existing and redis.call('EXISTS', jk) == 1 then existing = id end
  if existing then
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
