-- Enqueue a flow (docs/flows.md): jobs across the stages of one pipeline, each with a key and the
-- keys of its parents, in one atomic step — all of them or, on any refusal, none. A job without
-- parents is enqueued as enqueue_jobs enqueues it; a job with parents waits in state
-- `waiting-children` (in no line: not ready, not in the backlog) until they have all ended.
-- A script of its own rather than enqueue_jobs: that one takes one queue's keys, a flow spans
-- several queues and writes its hash and every parent's `dependents` besides.
-- KEYS: 1 outbox, 2 meta, 3 seq, 4 the flow's hash (`<P>flow:<id>`), then per queue of the
--       record's `queues` (in its order) 5 keys: ready, delayed, counts, wake, contract; then, for
--       a flow with an idempotency key, `<P>flowidem:<key>`. All of one pipeline: one hash tag,
--       one Cluster slot.
-- ARGV: 1 the call's record (JSON, includes/wire.lua): jobPrefix, flowId, now (ms),
--       maxPayloadBytes, queues (the flow's queue names, a list), optional contractHashes (per
--       queue name the hash of its contract the caller checked the jobs against; a queue left
--       out: none), jobFields (the job fields this call sends, by name, a list: `id`, `key`,
--       `queue`, `data` first, then any of priority, attempts, timeoutMs, trace, group, task,
--       delayMs, uses, notify (as enqueue_jobs takes them), parents (the parents' keys,
--       space-separated), onParentFailure (fail|continue|ignore; '' = fail)); then from ARGV 2,
--       per job, exactly those values in that order (columnar: no decode per job). Each job's
--       parents come before it (the caller sends the jobs in a topological order, so a cycle is
--       refused here too). A job with parents and a delay waits out its delay once they have
--       ended (it goes to `delayed` at release, flow.lua). A record that is not a JSON object or
--       lacks a field: ERR_INVALID_RECORD naming it, nothing written.
-- Refusals (nothing written): ERR_INVALID_FLOW <why> (an unknown/repeated field, a duplicate or
-- unknown key, a parent not before its child, an unknown queue, a bad policy or task name, the
-- flow id in use, an idempotency key naming a flow without one of the call's keys),
-- ERR_INVALID_NOTIFY, ERR_INVALID_USES, ERR_INVALID_GROUP, ERR_PAYLOAD_TOO_LARGE,
-- ERR_CONTRACT_CHANGED <hash in force> (of a queue whose hash was not the one sent).
-- Returns name/value pairs written (the number of jobs written); for an idempotency key already
-- taken (within FLOW_IDEMPOTENCY_TTL_SECONDS) nothing is written and it returns flowId (that
-- flow's id) and ids (the id of each job of the call, in the call's order) instead.
--- @include "includes/wire"
--- @include "includes/keys"
--- @include "includes/record"
--- @include "includes/wake"
--- @include "includes/enqueueJob"
--- @include "includes/jobOptions"

-- How long a flow's idempotency key names it: as long as a job's (queue/producer.ts IDEMPOTENCY_TTL_SECONDS).
local FLOW_IDEMPOTENCY_TTL_SECONDS = 24 * 3600
local OPTIONAL = {priority = true, attempts = true, timeoutMs = true, trace = true, group = true, task = true,
  delayMs = true, uses = true, notify = true, parents = true, onParentFailure = true}
local LEADING = {'id', 'key', 'queue', 'data'}
local POLICIES = {fail = true, continue = true, ignore = true}

local call, bad = wireRecord('enqueue_flow call', ARGV[1])
bad = bad or wireRequire('enqueue_flow call', call, {'jobPrefix', 'string', 'flowId', 'string', 'now', 'number',
  'maxPayloadBytes', 'number', 'queues', 'table', 'jobFields', 'table'})
bad = bad or wireOptional('enqueue_flow call', call, {'contractHashes', 'table'})
if not bad then
  for _, list in ipairs({'queues', 'jobFields'}) do
    for _, v in ipairs(call[list]) do
      if type(v) ~= 'string' then
        bad = 'ERR_INVALID_RECORD enqueue_flow call: field ' .. list .. ' must be a list of names, got a ' .. type(v) .. ' in it'
      end
    end
  end
end
if bad then return redis.error_reply(bad) end
local jobPrefix, fid = call.jobPrefix, call.flowId
local now = call.now
local maxBytes = call.maxPayloadBytes
local nq = #call.queues
local hashes = call.contractHashes or {}
-- ARGV index of the call's record; each job's values follow it, `width` at a time.
local first = 1
-- Each sent field's offset from a job's first value (nil: not sent by this call).
local at, width = {}, 0

local function refuse(why)
  return redis.error_reply('ERR_INVALID_FLOW ' .. why)
end

-- The call's queues by name, each with its keys (as enqueueJob takes them), once every contract
-- hash sent is the one in force; or nil and the error reply.
local function queuesOf()
  if #KEYS ~= 4 + 5 * nq and #KEYS ~= 5 + 5 * nq then
    return nil, refuse('expected 4 + 5 keys per queue (+ 1 for an idempotency key), got ' .. #KEYS)
  end
  local queues = {}
  for i = 1, nq do
    local name = call.queues[i]
    local hash = hashes[name] or ''
    local k = 4 + 5 * (i - 1)
    local inForce = redis.call('HGET', KEYS[k + 5], 'hash') or ''
    if inForce ~= hash then return nil, redis.error_reply('ERR_CONTRACT_CHANGED ' .. inForce) end
    queues[name] = {ready = KEYS[k + 1], line = lineKeyOf(KEYS[k + 1]), delayed = KEYS[k + 2], counts = KEYS[k + 3],
      wake = KEYS[k + 4], outbox = KEYS[1], meta = KEYS[2], seq = KEYS[3]}
  end
  return queues
end

-- Reads the field list into `at` and `width`; an error reply when it or the number of values is wrong.
local function readFields()
  local list = table.concat(call.jobFields, ',')
  for _, name in ipairs(call.jobFields) do
    if at[name] or not (OPTIONAL[name] or LEADING[width + 1] == name) then
      return refuse('unknown, repeated or misplaced job field ' .. name .. ' in ' .. list .. ' (id,key,queue,data first)')
    end
    at[name] = width
    width = width + 1
  end
  if width < 4 or (#ARGV - first) % width ~= 0 or #ARGV == first then
    return refuse((#ARGV - first) .. ' values for jobs of ' .. width .. ' fields (' .. list .. ')')
  end
  return nil
end

-- The value of field `name` of the job at `i`, or `default` when not sent or ''.
local function field(i, name, default)
  local k = at[name]
  if not k then return default end
  local v = ARGV[i + k]
  if v == '' then return default end
  return v
end

-- The same flow submitted again under `idemKey`: the reply naming the first submission's flow and
-- jobs (nothing written), or nil when the key names no flow.
local function replayOf(idemKey)
  local first_fid = redis.call('GET', idemKey)
  if not first_fid then return nil end
  local fk = keyOf.flow(pipelineBase(jobPrefix), first_fid)
  local names = {}
  for i = first + 1, #ARGV, width do names[#names + 1] = 'k:' .. ARGV[i + 1] end
  local ids = {}
  for n = 1, #names, 1000 do
    local v = redis.call('HMGET', fk, unpack(names, n, math.min(n + 999, #names)))
    for j = 1, #v do
      if not v[j] then
        return refuse('the idempotency key names flow ' .. first_fid .. ', which has no job ' .. string.sub(names[n + j - 1], 3) .. ' (or is gone)')
      end
      ids[#ids + 1] = v[j]
    end
  end
  return {'flowId', first_fid, 'ids', ids}
end

-- The job at `i`'s options other than its key and parents, checked; an error reply or nil.
local function checkOptions(i, key)
  local task = field(i, 'task', '')
  if task ~= '' and (#task > 100 or not string.match(task, '^[%w][%w%._%-]*$')) then
    return refuse('job ' .. key .. ': a task name is 1..100 characters of A-Z a-z 0-9 . _ - starting with a letter or digit')
  end
  local policy = field(i, 'onParentFailure', 'fail')
  if not POLICIES[policy] then return refuse('job ' .. key .. ': onParentFailure must be fail, continue or ignore, got ' .. policy) end
  local delay = tonumber(field(i, 'delayMs', '0'))
  if not delay or delay < 0 or delay ~= math.floor(delay) then return refuse('job ' .. key .. ': delayMs must be an integer ≥ 0') end
  local notify = field(i, 'notify', '')
  if notify ~= '' then
    local _, err = notifyField('job ' .. key, notify)
    if err then return redis.error_reply(err) end
  end
  local group = field(i, 'group', '')
  if #group > GROUP_MAX_BYTES then
    return redis.error_reply('ERR_INVALID_GROUP job ' .. key .. ': group is ' .. #group .. ' bytes, limit ' .. GROUP_MAX_BYTES)
  end
  local uses = field(i, 'uses', '')
  if uses ~= '' then
    local _, err = usesGroup('job ' .. key, uses, groupOf(group))
    if err then return redis.error_reply(err) end
  end
  return nil
end

-- Every job checked before anything is written: keys, parents, queues, sizes, options. Returns
-- (each key's job id, each parent key's dependents' ids, the jobs' ARGV indexes in order), or
-- (nil, nil, nil, an error reply).
local function checkAll(queues)
  local idOf, deps, order = {}, {}, {}
  for i = first + 1, #ARGV, width do
    local id, key, queue, data = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    if idOf[key] then return nil, nil, nil, refuse('duplicate key ' .. key) end
    if not queues[queue] then
      return nil, nil, nil, refuse('job ' .. key .. ': queue ' .. queue .. ' is not in the call\'s queue list')
    end
    if #data > maxBytes then
      return nil, nil, nil, redis.error_reply('ERR_PAYLOAD_TOO_LARGE job ' .. key .. ' is ' .. #data .. ' bytes, limit ' .. maxBytes)
    end
    local bad = checkOptions(i, key)
    if bad then return nil, nil, nil, bad end
    local listed = {}
    for p in string.gmatch(field(i, 'parents', ''), '%S+') do
      if not idOf[p] then
        return nil, nil, nil, refuse('job ' .. key .. ': parent ' .. p .. ' is not a job listed before it in the flow')
      end
      -- (twice would count the parent twice in `pending` and release the job never)
      if listed[p] then return nil, nil, nil, refuse('job ' .. key .. ': parent ' .. p .. ' is listed twice') end
      listed[p] = true
      local d = deps[p]
      if not d then
        d = {}
        deps[p] = d
      end
      d[#d + 1] = id
    end
    idOf[key] = id
    order[#order + 1] = i
  end
  return idOf, deps, order
end

-- The record fields beyond the usual of the job at `i` (its flow and key, dependents, trace, task,
-- policy, notify, uses) and its group: a job with uses and no group joins its resources' implicit one.
local function extraOf(i, key, deps)
  local extra = {'flow', fid, 'flowKey', key}
  local d = deps[key]
  if d then
    extra[#extra + 1] = 'dependents'
    extra[#extra + 1] = table.concat(d, ' ')
  end
  for _, name in ipairs({'trace', 'task', 'onParentFailure'}) do
    local v = field(i, name, '')
    if v ~= '' and not (name == 'onParentFailure' and v == 'fail') then
      extra[#extra + 1] = name
      extra[#extra + 1] = v
    end
  end
  local notify = field(i, 'notify', '')
  if notify ~= '' then
    extra[#extra + 1] = 'notify'
    extra[#extra + 1] = notifyField('job ' .. key, notify)
  end
  local group = groupOf(field(i, 'group', ''))
  local uses = field(i, 'uses', '')
  if uses ~= '' then
    group = usesGroup('job ' .. key, uses, group)
    extra[#extra + 1] = 'uses'
    extra[#extra + 1] = uses
  end
  return extra, group
end

-- The job at `i`'s flow fields for its records (the outbox only: its flow, key, parents' keys and
-- ids, policy) and its number of parents.
local function recordedOf(i, key, idOf)
  local parents = field(i, 'parents', '')
  local pending = 0
  local recorded = {'flow', fid, 'flowKey', key}
  local parentIds = {}
  for p in string.gmatch(parents, '%S+') do
    pending = pending + 1
    parentIds[pending] = idOf[p]
  end
  if pending > 0 then
    recorded[5], recorded[6], recorded[7], recorded[8] = 'parents', parents, 'parentIds', table.concat(parentIds, ' ')
  end
  local policy = field(i, 'onParentFailure', '')
  if policy ~= '' and policy ~= 'fail' then
    recorded[#recorded + 1] = 'onParentFailure'
    recorded[#recorded + 1] = policy
  end
  return recorded, pending
end

-- Writes a job with parents, in state `waiting-children` and in no line; flow.lua releases it
-- (into `delayed` for a delay, waited out from its release).
local function writeWaiting(keys, i, extra, group, recorded, pending)
  local id, queue, data = ARGV[i], ARGV[i + 2], ARGV[i + 3]
  local priority = tonumber(field(i, 'priority', 0))
  local attempts, timeout = field(i, 'attempts', '3'), field(i, 'timeoutMs', '0')
  local delay = tonumber(field(i, 'delayMs', '0'))
  extra[#extra + 1] = 'parents'
  extra[#extra + 1] = field(i, 'parents', '')
  if priority ~= 0 then
    extra[#extra + 1] = 'priority'
    extra[#extra + 1] = priority
  end
  if timeout ~= '0' then
    extra[#extra + 1] = 'timeout'
    extra[#extra + 1] = timeout
  end
  if group then
    extra[#extra + 1] = 'group'
    extra[#extra + 1] = group
  end
  if delay > 0 then
    extra[#extra + 1] = 'delayMs'
    extra[#extra + 1] = delay
  end
  redis.call('HSET', jobKey(jobPrefix, id), 'queue', queue, 'attempts', attempts, 'createdAt', now,
    'state', 'waiting-children', 'pending', pending, 'data', data, unpack(extra))
  redis.call('HINCRBY', keys.counts, 'waitingChildren', 1)
  local fields = {'type', 'enqueued', 'id', id, 'queue', queue, 'at', now, 'from', 'flow', 'state', 'waiting-children', 'attempts', attempts}
  local eventsN = #fields
  for k = 1, #recorded do fields[#fields + 1] = recorded[k] end
  fields[#fields + 1] = 'data'
  fields[#fields + 1] = data
  record(KEYS[1], KEYS[2], fields, eventsN)
end

-- Writes the job at `i`: one without parents as enqueue_jobs does, one with them waiting. Returns
-- true when it went to its queue's ready line (the call wakes each such queue once).
local function writeJob(queues, i, idOf, deps)
  local id, key, queue, data = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local extra, group = extraOf(i, key, deps)
  local recorded, pending = recordedOf(i, key, idOf)
  if pending > 0 then
    writeWaiting(queues[queue], i, extra, group, recorded, pending)
    return false
  end
  local priority = tonumber(field(i, 'priority', 0))
  local attempts, timeout = field(i, 'attempts', '3'), field(i, 'timeoutMs', '0')
  local delay = tonumber(field(i, 'delayMs', '0'))
  return enqueueJob(queues[queue], jobPrefix, queue, now, id, data, priority, delay, attempts, timeout, '', '', extra, group, recorded)
end

local queues
queues, bad = queuesOf()
if not queues then return bad end
bad = readFields()
if bad then return bad end
local idemKey = #KEYS == 5 + 5 * nq and KEYS[#KEYS] or nil
if idemKey then
  local replay = replayOf(idemKey)
  if replay then return replay end
end
if redis.call('EXISTS', KEYS[4]) == 1 then return refuse('flow ' .. fid .. ' exists') end
local idOf, deps, order
idOf, deps, order, bad = checkAll(queues)
if bad then return bad end

local woke, kmap = {}, {}
for _, i in ipairs(order) do
  if writeJob(queues, i, idOf, deps) then woke[ARGV[i + 2]] = true end
  kmap[#kmap + 1] = 'k:' .. ARGV[i + 1]
  kmap[#kmap + 1] = ARGV[i]
end
-- (the key → id map in runs: a flow of 10,000 jobs is 20,000 values)
for i = 1, #kmap, 1000 do
  redis.call('HSET', KEYS[4], unpack(kmap, i, math.min(i + 999, #kmap)))
end
redis.call('HSET', KEYS[4], 'total', #order, 'open', #order, 'createdAt', now)
if idemKey then redis.call('SET', idemKey, fid, 'EX', FLOW_IDEMPOTENCY_TTL_SECONDS) end
for queue in pairs(queues) do keepLayoutFence(KEYS[2], queue) end
for queue in pairs(woke) do wake(queues[queue].wake) end
return {'written', #order}
