--- @include "numbers"
--- @include "malformed"
--- @include "readyLine"
--- @include "parkedData"

-- What a claim needs from a job record, checked before the claim changes it: the HMGET
-- fields, or nil and the dead-letter reason (no hash, no data, no numeric score). Counters the
-- other scripts HINCRBY (attemptsMade, stalls, handbacks) are reset to 0 when they are not
-- integers, and a score in an odd form (' 1', '0x10', '1e3') is stored as a plain number, so
-- every later script can use the record as it is. Non-numeric attempts/timeout/createdAt come
-- back as nil: the caller's defaults.
-- `queue`, when the id came from a line (readyLine.lua, or group `lineGroup`'s line, groups.lua):
-- a record that is not a ready priority-0 job of this queue and of that group (none for the
-- queue's own line) — none at all, cancelled, deleted, made again elsewhere — is a stale entry:
-- returns false. A line job needs no score.
local CLAIM_FIELDS = {'data', 'attemptsMade', 'attempts', 'timeout', 'stalls', 'createdAt', 'contentHash', 'score', 'handbacks', 'trace', 'requeued', 'state', 'queue', 'priority', 'group', 'uses', 'task', 'errors', 'parents', 'flow', 'onParentFailure'}
local CLAIM_COUNTERS = {2, 5, 9} -- attemptsMade, stalls, handbacks
local CLAIM_NUMBERS = {3, 4, 6}  -- attempts, timeout, createdAt
local function claimable(jk, id, queue, lineGroup)
  local f = redis.pcall('HMGET', jk, unpack(CLAIM_FIELDS))
  if f.err then return nil, notAHash(jk, id) or ('malformed: ' .. f.err) end
  local fix
  if queue and (f[12] ~= 'ready' or f[13] ~= queue or not inLine(f[14]) or groupOf(f[15]) ~= lineGroup) then return false end
  -- Data longer than 64 B waited in its own key (parkedData.lua): it joins the record now.
  if not f[1] then f[1] = unparkData(jk, id) end
  if queue then
    if not f[1] then return nil, 'malformed: job record has no data' end
  else
    if not f[1] then return nil, 'malformed: job record missing or has no data' end
    local score = numericScore(f[8])
    if not score then
      return nil, 'malformed: job record has no numeric score (' .. (f[8] and cjson.encode(string.sub(f[8], 1, 40)) or 'none') .. ')'
    end
    if not string.match(f[8], '^%-?%d+$') and not string.match(f[8], '^%-?%d+%.%d+$') then fix = {'score', score} end
  end
  -- (plain loops, no table unless something needs fixing: this runs for every claimed job)
  for k = 1, 3 do
    local i = CLAIM_COUNTERS[k]
    if f[i] and not isCounter(f[i]) then
      fix = fix or {}
      fix[#fix + 1] = CLAIM_FIELDS[i]
      fix[#fix + 1] = 0
      f[i] = '0'
    end
  end
  if fix then redis.call('HSET', jk, unpack(fix)) end
  for k = 1, 3 do
    local i = CLAIM_NUMBERS[k]
    if not numericScore(f[i]) then f[i] = nil end
  end
  return f
end
