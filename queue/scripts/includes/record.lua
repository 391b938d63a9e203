--- @include "keys"

-- Every transition is appended to the queue's capped event stream (for followers: `conveyor
-- events`, the typed API) and, when a recorder has switched it on, to the pipeline's
-- outbox: a transactional record drained into PostgreSQL. Queues without PostgreSQL never
-- grow the outbox. Both keys share the pipeline's hash tag with `outboxKey`.
local OUTBOX_MAXLEN = 1000000
local EVENTS_MAXLEN = 10000
-- Whether the outbox is on, read once per script call (a script records up to a few transitions).
local recordsOn = {}
-- `fields` always start 'type', t, 'id', id, 'queue', q; a transition that carries the job's
-- input has it as the last pair ('data', …). The input can be large: followers of the event
-- stream get ids and outcomes, not payloads. (No field-by-field copy: this runs twice per job.)
local function record(outboxKey, metaKey, fields)
  local n = #fields
  if fields[n - 1] == 'data' then n = n - 2 end
  local base = string.sub(outboxKey, 1, #outboxKey - 6)
  redis.call('XADD', queueKeyPrefix(base, fields[6]) .. 'events', 'MAXLEN', '~', EVENTS_MAXLEN, '*', unpack(fields, 1, n))
  if recordsOn[metaKey] == nil then recordsOn[metaKey] = redis.call('HGET', metaKey, 'records') == '1' end
  if recordsOn[metaKey] then
    redis.call('XADD', outboxKey, 'MAXLEN', '~', OUTBOX_MAXLEN, '*', unpack(fields))
  end
end
