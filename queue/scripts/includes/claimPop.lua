--- @include "keys"
--- @include "record"
--- @include "claimable"
--- @include "malformed"
--- @include "readyLine"

-- The claim's second step, after promoting due jobs: pop the queue's own (ungrouped) jobs, the
-- prioritised first (sorted set), then the line of priority-0 jobs (readyLine.lua). Each takes
-- the claim `c` (claimJobs.lua, newClaim) and appends what may start to c.ok: id, fields, score
-- (false: from the line), per job.

-- Checks one popped job before anything changes (a Lua error later would leave the rest of the
-- batch in no set). Returns false for a stale line entry, 'dead' for a record dead-lettered here,
-- else true (the job is appended to c.ok).
local function claimCheck(c, id, score, group)
  local jk = jobKey(c.jobPrefix, id)
  local f, reason = claimable(jk, id, (not score) and c.queue or nil, group)
  if f == false then return false end
  if not f then
    local keys = c.keys
    deadLetterRaw(jk, id, keys.dead, keys.counts, c.now, reason, c.queue, score or nil)
    record(keys.outbox, keys.meta, {'type', 'dead', 'id', id, 'queue', c.queue, 'at', c.now, 'reason', reason, 'error', cjson.encode({message = reason})})
    return 'dead'
  end
  local ok = c.ok
  ok[#ok + 1] = id
  ok[#ok + 1] = f
  ok[#ok + 1] = score
  return true
end

-- Pops up to c.count jobs; sets c.taken (started or dead-lettered). Stale line entries (a
-- cancelled or deleted job's) are skipped and another is popped in their place; so is a second
-- entry of one id (a deleted id enqueued again) within this claim (c.seen).
local function popUngrouped(c)
  local readyKey, count, seen = c.keys.ready, c.count, c.seen
  local popped = redis.call('ZPOPMIN', readyKey, count)
  for i = 1, #popped, 2 do claimCheck(c, popped[i], popped[i + 1]) end
  local taken = #popped / 2
  if taken < count then
    local line, stale = lineKeyOf(readyKey), 0
    for _ = 1, 8 do
      local want = count - taken
      local ids = redis.call('LPOP', line, want) or {}
      for _, id in ipairs(ids) do
        if not seen[id] and claimCheck(c, id, false) then
          taken = taken + 1
          seen[id] = true
        else
          stale = stale + 1
        end
      end
      if #ids < want then
        -- The line is empty now: no stale entry is left in it (and a count that drifted resets).
        if #ids > 0 then redis.call('DEL', lineStaleKeyOf(readyKey)) end
        stale = 0
        break
      end
      if taken >= count then break end
    end
    if stale > 0 and redis.call('DECRBY', lineStaleKeyOf(readyKey), stale) < 0 then redis.call('DEL', lineStaleKeyOf(readyKey)) end
  end
  c.taken = taken
end

-- One of the queue's own jobs for the group ring's member '': the prioritised first, then the
-- line (stale entries skipped and uncounted, as above). Returns claimCheck's outcome, nil for none.
local function ungroupedTurn(c)
  local readyKey, seen = c.keys.ready, c.seen
  local p = redis.call('ZPOPMIN', readyKey)
  if p[1] then return claimCheck(c, p[1], p[2]) end
  local line, stale, outcome = lineKeyOf(readyKey), 0, nil
  for _ = 1, 100 do
    local id = redis.call('LPOP', line)
    if not id then
      if stale > 0 then redis.call('DEL', lineStaleKeyOf(readyKey)) end
      return nil
    end
    if not seen[id] then outcome = claimCheck(c, id, false) end
    if outcome then
      seen[id] = true
      break
    end
    stale = stale + 1
  end
  if stale > 0 and redis.call('DECRBY', lineStaleKeyOf(readyKey), stale) < 0 then redis.call('DEL', lineStaleKeyOf(readyKey)) end
  return outcome
end
