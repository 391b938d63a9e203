--- @include "groups"

-- Job options enqueue_jobs and enqueue_flow check the same way before anything is written.

local NOTIFY_EVENT = {completed = true, dead = true, cancelled = true}
-- A job's notify JSON ({url, events}) as its record keeps it (`<events> <url>`, read by
-- notify.lua), or nil and an error reply's text naming `which` (the job).
local function notifyField(which, text)
  local ok, n = pcall(cjson.decode, text)
  local bad = 'ERR_INVALID_NOTIFY ' .. which .. ': notify must be JSON {"url": "http(s)://…", "events": [completed|dead|cancelled, …]}'
  if not ok or type(n) ~= 'table' or type(n.url) ~= 'string' or not string.match(n.url, '^https?://%S+$') or type(n.events) ~= 'table' or #n.events == 0 then
    return nil, bad
  end
  for _, e in ipairs(n.events) do
    if not NOTIFY_EVENT[e] then return nil, bad end
  end
  return table.concat(n.events, ',') .. ' ' .. n.url
end

-- The group of a job with `uses` (JSON {resource: {unit: amount}}): its own, else the implicit
-- group `~res:<resources sorted, joined by +>`; or nil and an error reply's text naming `which`.
local function usesGroup(which, uses, group)
  local ok, decoded = pcall(cjson.decode, uses)
  if not ok or type(decoded) ~= 'table' or next(decoded) == nil then
    return nil, 'ERR_INVALID_USES ' .. which .. ': uses must be a JSON object {resource: {unit: amount}}'
  end
  if not group then
    local names = {}
    for name in pairs(decoded) do names[#names + 1] = name end
    table.sort(names)
    group = '~res:' .. table.concat(names, '+')
  end
  if #group > GROUP_MAX_BYTES then
    return nil, 'ERR_INVALID_GROUP ' .. which .. ': group is ' .. #group .. ' bytes, limit ' .. GROUP_MAX_BYTES
  end
  return group
end
