--- @include "keys"
--- @include "record"
--- @include "variadic"
--- @include "readyLine"
--- @include "fencingTokens"
--- @include "flow"

-- The claim reply's per-job fields, in the order each job's values follow them: a new field is
-- one more name here and one more value in claimLeases.
local CLAIM_REPLY_FIELDS = 'id,token,data,attempt,attempts,timeoutMs,stalls,createdAt,contentHash,trace,requeued,resources,task,errors,contract,parents'

-- The claim's last step: a lease for each job in c.ok (what the gate let start: claimAdmission.lua),
-- with `leaseMs` and `workerId`. Per claim, not per job: one reservation of fencing tokens
-- (top - started + 1 … top), one ZADD of the lease deadlines, one HINCRBY of the starts, one
-- `started` event. Takes the claim `c` (claimJobs.lua, newClaim); returns the reply's jobs
-- (empty, or CLAIM_REPLY_FIELDS then each job's values) and how many started.
local function claimLeases(c, leaseMs, workerId)
  local jobs, ok, keys, queue = {}, c.ok, c.keys, c.queue
  local started = #ok / 3
  if started == 0 then return jobs, 0 end
  local top = reserveTokens(keys.fence, started, c.clockMs)
  -- (numbers turned into text once: Lua formats a number with sprintf each time it is an argument)
  local deadlines, at, deadline = {}, tostring(c.startAt), tostring(c.startAt + leaseMs)
  -- The `started` events: one entry for the claim (record.lua, appendBatchEvent).
  local ids, tokens, attempts = {}, {}, {}
  local outbox = outboxOn(keys.meta, queue)
  local grants = c.grants
  -- The queue's contract hash in force ('' none), read once per claim: the worker re-reads the
  -- contract when it is not the one it has compiled (queue/contracts.ts, ContractCache).
  local contract = redis.call('HGET', keys.contract, 'hash') or ''
  jobs[1] = CLAIM_REPLY_FIELDS
  for k = 1, started do
    local id, f = ok[3 * k - 2], ok[3 * k - 1]
    local token = top - started + k
    local tokenText = tostring(token)
    local attempt = (tonumber(f[2]) or 0) + 1
    -- (a first attempt, the common case, needs no formatting)
    local attemptText = f[2] == '0' and '1' or tostring(attempt)
    if f[8] then
      redis.call('HSET', jobKey(c.jobPrefix, id), 'state', 'active', 'token', tokenText, 'worker', workerId, 'startedAt', at)
    else
      -- A line job has no score; a sweeper of the previous layout needs one to put it back
      -- (docs/protocol.md, "Layout versions"): the head of priority 0.
      redis.call('HSET', jobKey(c.jobPrefix, id), 'state', 'active', 'token', tokenText, 'worker', workerId, 'startedAt', at,
        'score', PRIORITY0_HEAD_SCORE)
    end
    if outbox then
      local entry = {'type', 'started', 'id', id, 'queue', queue, 'at', at, 'token', tokenText, 'attempt', attemptText, 'worker', workerId}
      -- (the job's task for the records' `task` column: only a job that names one)
      if f[17] and f[17] ~= '' then
        entry[#entry + 1] = 'task'
        entry[#entry + 1] = f[17]
      end
      recordOutbox(keys.outbox, keys.meta, entry)
    end
    ids[k], tokens[k], attempts[k] = id, tokenText, attemptText
    deadlines[2 * k - 1] = deadline
    deadlines[2 * k] = id
    -- (in CLAIM_REPLY_FIELDS' order)
    local j = #jobs
    jobs[j + 1] = id
    jobs[j + 2] = token
    jobs[j + 3] = f[1]
    jobs[j + 4] = attempt
    jobs[j + 5] = f[3] or '1'
    jobs[j + 6] = f[4] or '0'
    jobs[j + 7] = f[5] or '0'
    jobs[j + 8] = f[6] or '0'
    jobs[j + 9] = f[7] or ''
    jobs[j + 10] = f[10] or ''
    jobs[j + 11] = f[11] or ''
    jobs[j + 12] = grants and grants[id] or ''
    -- (the job's task name and its earlier attempts' errors, attemptErrors.lua: '' when none)
    jobs[j + 13] = f[17] or ''
    jobs[j + 14] = f[18] or ''
    jobs[j + 15] = contract
    -- (a flow job's parents' outcomes, flow.lua: '' for any other job)
    jobs[j + 16] = f[19] and flowParentsJson(c.jobPrefix, f[20], f[19], f[21]) or ''
  end
  if started == 1 then
    -- (one job, the common case at concurrency 1: the per-job form without building lists)
    redis.call('XADD', eventsKeyOf(keys.outbox, queue), 'MAXLEN', '~', EVENTS_MAXLEN, '*', 'type', 'started', 'id', ids[1],
      'queue', queue, 'at', at, 'token', tokens[1], 'attempt', attempts[1], 'worker', workerId)
  else
    appendBatchEvent(eventsKeyOf(keys.outbox, queue), 'started', {'queue', queue, 'at', at},
      {'id', ids, 'token', tokens, 'attempt', attempts}, {'worker', workerId})
  end
  callVariadic('ZADD', keys.inflight, deadlines)
  redis.call('HINCRBY', keys.counts, 'started', started)
  return jobs, started
end
