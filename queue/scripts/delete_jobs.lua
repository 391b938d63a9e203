-- Delete jobs of one queue by id (the dashboard's bulk delete). A deleted job leaves its set
-- (ready, delayed or dead; a line entry stays behind as a stale one, see includes/readyLine.lua);
-- its record, its parked data (includes/parkedData.lua), its log and a set-aside malformed key
-- are deleted; its idempotency key is freed when it still names this job (a new enqueue with
-- that key makes a new job); `deleted` is counted and a `deleted` event recorded (`was` = its state; the job
-- records mark it `deleted`, docs/records.md). A fan-out child that had not finished reports
-- {"id", "error": {"name": "DeletedError"}} to the fan-in, so the join still runs.
-- Refused, nothing changed: a running job (`active`) and a fan-out parent whose children are not
-- all finished (`fannedOut` / `joined`), a flow job waiting for its parents (`waiting-children`:
-- its count and its dependents would be left behind) — cancel it first (cancel_job), then delete it.
-- KEYS: 1 ready, 2 delayed, 3 dead, 4 counts, 5 outbox, 6 meta
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, idempotencyPrefix (the
--       queue's), queue, now (ms); 2… the ids. A record that is not a JSON object or lacks a
--       field: ERR_INVALID_RECORD naming it.
-- Returns one list per id, in order, of name/value pairs: id, outcome (`deleted`, `refused` or
-- `notFound`: no such job in this queue) and state, the state the job was in (`malformed` for a
-- job key that is not a hash; left out when there was none).
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/record"
--- @include "includes/fanIn"
--- @include "includes/malformed"
--- @include "includes/readyLine"
--- @include "includes/parkedData"
--- @include "includes/groups"
--- @include "includes/flow"

local call, bad = wireRecord('delete_jobs call', ARGV[1])
bad = bad or wireRequire('delete_jobs call', call,
  {'jobPrefix', 'string', 'idempotencyPrefix', 'string', 'queue', 'string', 'now', 'number'})
if bad then return redis.error_reply(bad) end
local jobPrefix, idemPrefix, queue, now = call.jobPrefix, call.idempotencyPrefix, call.queue, call.now
local base = pipelineBase(jobPrefix)
local REFUSED = {active = true, fannedOut = true, joined = true, ['waiting-children'] = true}
local DELETED = '{"name":"DeletedError","message":"deleted"}'

-- Whether the id was in one of the queue's sets (removed from all of them).
local function leaveSets(id)
  local n = 0
  for i = 1, 3 do n = n + redis.call('ZREM', KEYS[i], id) end
  return n > 0
end

local out = {}
local deleted = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local jk = jobKey(jobPrefix, id)
  local f = redis.pcall('HMGET', jk, 'state', 'queue', 'parent', 'trace', 'idempotencyKey', 'finishedAt', 'deadReason', 'group', 'holdsGroup', 'flow', 'flowKey', 'dependents')
  local outcome, state = 'notFound', ''
  if f.err then
    -- Not a hash (another client SET it): deleted if it is this queue's.
    if leaveSets(id) then
      redis.call('DEL', jk)
      outcome, state = 'deleted', 'malformed'
    end
  elseif not f[1] then
    -- No record (expired): a leftover set entry is removed, nothing to record.
    if leaveSets(id) then outcome = 'deleted' end
  elseif f[2] == queue then
    state = f[1]
    if REFUSED[state] then
      outcome = 'refused'
    else
      -- A ready job not in the sorted set waits in the line: its entry stays, counted stale.
      local wasQueued = leaveSets(id)
      if state == 'ready' and groupOf(f[8]) then
        groupCancelledWaiting(queuePrefixOfReady(KEYS[1]), f[8], id)
      elseif state == 'ready' then
        leftLine(KEYS[1], wasQueued)
      elseif f[9] == '1' and groupOf(f[8]) then
        -- (a sequenced retry waiting for its backoff held its group's slot)
        groupHeldReleased(queuePrefixOfReady(KEYS[1]), f[8], jk)
      end
      if f[3] and f[3] ~= '' then
        finishChild(jobPrefix, jk, id, '{"id":' .. cjson.encode(id) .. ',"error":' .. DELETED .. '}', now, f[3], f[4] or false)
      end
      -- An unfinished flow job deleted ends as a cancelled one: its dependents follow their policies.
      if f[10] and (state == 'ready' or state == 'delayed') then
        flowJobEnded(jobPrefix, now, f[10], f[11], id, f[12], '{"id":' .. cjson.encode(id) .. ',"error":"deleted"}', 'cancelled')
      end
      if f[5] and f[5] ~= '' and redis.call('GET', idemPrefix .. f[5]) == id then redis.call('DEL', idemPrefix .. f[5]) end
      redis.call('DEL', jk, malformedKey(jk, id), base .. 'logs:' .. id, dataKeyOf(jk, id))
      local fields = {'type', 'deleted', 'id', id, 'queue', queue, 'at', now, 'was', state}
      if f[6] and f[6] ~= '' then
        fields[#fields + 1] = 'finishedAt'
        fields[#fields + 1] = f[6]
      end
      if f[7] and f[7] ~= '' then
        fields[#fields + 1] = 'reason'
        fields[#fields + 1] = f[7]
      end
      record(KEYS[5], KEYS[6], fields)
      outcome = 'deleted'
    end
  end
  if outcome == 'deleted' then deleted = deleted + 1 end
  local one = {'id', id, 'outcome', outcome}
  if state ~= '' then
    one[5] = 'state'
    one[6] = state
  end
  out[#out + 1] = one
end
if deleted > 0 then redis.call('HINCRBY', KEYS[4], 'deleted', deleted) end
return out
