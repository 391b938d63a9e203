-- The job's `errors`: a JSON array of its last ATTEMPT_ERRORS_KEPT failed attempts, oldest first,
-- each {"attempt", "kind", "message", "at", "details"?} (docs/protocol.md, "Attempt errors"), what
-- the next attempt's handler is told (`previousErrors`). Entries are built and kept as JSON text,
-- never decoded and encoded again: Redis' cjson would turn an empty array in `details` into {}.
local ATTEMPT_ERRORS_KEPT = 5
local ATTEMPT_ERROR_MAX_BYTES = 2048
-- The message an entry keeps before its details are dropped to make room.
local ATTEMPT_ERROR_MIN_MESSAGE = 256
local ATTEMPT_ERROR_KINDS = {exception = true, ['invalid-result'] = true, timeout = true, ['handed-back'] = true, stalled = true}

-- `message` cut to at most `room` bytes of JSON text (quotes included), on a UTF-8 boundary.
local function attemptMessageWithin(message, room)
  local json = cjson.encode(message)
  if #json <= room then return json end
  local keep = room - 5 -- the quotes and '…'
  while keep > 0 do
    -- (not inside a multi-byte character: back off over continuation bytes)
    while keep > 0 and string.byte(message, keep + 1) and string.byte(message, keep + 1) >= 128 and string.byte(message, keep + 1) < 192 do
      keep = keep - 1
    end
    json = cjson.encode(string.sub(message, 1, keep) .. '…')
    if #json <= room then return json end
    keep = keep - (#json - room)
  end
  return '"…"'
end

-- One entry's JSON text, at most ATTEMPT_ERROR_MAX_BYTES: the message is cut first; details
-- that leave it less than ATTEMPT_ERROR_MIN_MESSAGE bytes are dropped. `details`: JSON text of
-- an array, or nil/''.
local function attemptErrorJson(attempt, kind, message, at, details)
  if not ATTEMPT_ERROR_KINDS[kind] then kind = 'exception' end
  if type(message) == 'number' then message = tostring(message) end
  if type(message) ~= 'string' then message = '' end
  -- (details go into the list as the text they came as: only a JSON array is taken)
  if details == '' or (details and string.sub(details, 1, 1) ~= '[') then details = nil end
  if details then
    local ok, v = pcall(cjson.decode, details)
    if not ok or type(v) ~= 'table' then details = nil end
  end
  local head = '{"attempt":' .. tostring(attempt) .. ',"kind":"' .. kind .. '","message":'
  local tail = ',"at":' .. tostring(at)
  local room = ATTEMPT_ERROR_MAX_BYTES - #head - #tail - 1
  if details and room - #',"details":' - #details < ATTEMPT_ERROR_MIN_MESSAGE then details = nil end
  if details then
    tail = tail .. ',"details":' .. details
    room = room - #',"details":' - #details
  end
  return head .. attemptMessageWithin(message, room) .. tail .. '}'
end

-- The top-level objects of a JSON array text, as texts (strings and nesting skipped over).
local function attemptErrorEntries(list)
  local entries, depth, start, inString, i = {}, 0, nil, false, 2
  while true do
    local p = string.find(list, inString and '["\\]' or '["{}]', i)
    if not p then return entries end
    local ch = string.sub(list, p, p)
    i = p + 1
    if inString then
      if ch == '\\' then i = p + 2 else inString = false end
    elseif ch == '"' then
      inString = true
    elseif ch == '{' then
      if depth == 0 then start = p end
      depth = depth + 1
    elseif depth > 0 then
      depth = depth - 1
      if depth == 0 then entries[#entries + 1] = string.sub(list, start, p) end
    end
  end
end

-- Append one failed attempt (attemptErrorJson's text) to the job's `errors`, keeping the last
-- ATTEMPT_ERRORS_KEPT. One HGET and one HSET.
local function pushAttemptError(jk, entry)
  local raw = redis.call('HGET', jk, 'errors')
  local entries = {}
  if raw and string.sub(raw, 1, 1) == '[' then entries = attemptErrorEntries(raw) end
  entries[#entries + 1] = entry
  local from = math.max(1, #entries - ATTEMPT_ERRORS_KEPT + 1)
  redis.call('HSET', jk, 'errors', '[' .. table.concat(entries, ',', from) .. ']')
end
