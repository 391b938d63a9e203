--- @include "keys"

-- Resources (docs/protocol.md, "Resources"): named sets of API keys, each with limits per
-- sliding window (`requests` and any cost unit), kept in one hash per resource in the pipeline's
-- slot, `<P>res:<name>`: `ceiling`, `keys` (ids, comma-separated), `limits:<id>`
-- ('<unit>=<max>/<windowMs>,…'), `log:<id>:<unit>` (the window log 'time:amount,…'; an amount
-- may be negative: a usage correction), `bench:<id>` (until, ms), `admitted:<id>`.
-- A claim reads each resource it meets once (HGETALL), decides in memory and writes once
-- (resourcesFlush): the cost is per claim and resource, not per job.

-- A log's newest entry takes a new amount when it is younger than window / LOG_MERGE (its time
-- moves forward to now: its amounts leave the window later, never earlier), so a log holds
-- ~LOG_MERGE entries whatever the rate.
local LOG_MERGE = 64
-- An unknown resource or an amount no key can ever admit is looked at again after this (ms).
local RESOURCE_RECHECK_MS = 1000

local function resourceKeyOf(jobPrefix, name)
  return pipelineBase(jobPrefix) .. 'res:' .. name
end

-- One key-unit window: {max, window, cap, entries = {{t, n}, …}, used}.
local function parseWindow(limit, logText, now)
  local max, window = string.match(limit, '^(%d+)/(%d+)$')
  max, window = tonumber(max), tonumber(window)
  local w = {max = max, window = window, entries = {}, used = 0}
  for t, n in string.gmatch(logText or '', '(%d+):(%-?%d+)') do
    t, n = tonumber(t), tonumber(n)
    if t > now - window then
      w.entries[#w.entries + 1] = {t, n}
      w.used = w.used + n
    end
  end
  return w
end

-- The resource's state for this claim, read once: nil when it does not exist.
local function resourceRead(states, jobPrefix, name, now)
  local s = states[name]
  if s ~= nil then return s or nil end
  local key = resourceKeyOf(jobPrefix, name)
  local flat = redis.call('HGETALL', key)
  local h = {}
  for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
  if not h.keys then
    states[name] = false
    return nil
  end
  -- `now` is Redis' own clock, read once by the claim (control.lua, serverTimeMs): a caller's
  -- clock, taken before its call waited its turn or on another node, would let a window of starts
  -- hold claims stamped up to that wait or skew apart. And the window's clock only moves forward
  -- (the queue rate limit's rule, control.lua): a claim older than the newest entry counts as at
  -- that entry's time.
  for f, v in pairs(h) do
    if string.sub(f, 1, 4) == 'log:' then
      for t in string.gmatch(v, '(%d+):%-?%d+') do
        t = tonumber(t)
        if t > now then now = t end
      end
    end
  end
  local ceiling = tonumber(h.ceiling) or 0.9
  s = {key = key, now = now, ids = {}, byId = {}}
  for id in string.gmatch(h.keys, '[^,]+') do
    local k = {id = id, bench = tonumber(h['bench:' .. id] or 0) or 0, windows = {}, units = {}, admitted = 0}
    for unit, limit in string.gmatch(h['limits:' .. id] or '', '([^=,]+)=([^,]+)') do
      local w = parseWindow(limit, h['log:' .. id .. ':' .. unit], now)
      if w.max then
        w.cap = math.max(1, math.floor(ceiling * w.max + 1e-9))
        k.windows[unit] = w
        k.units[#k.units + 1] = unit
      end
    end
    s.ids[#s.ids + 1] = id
    s.byId[id] = k
  end
  states[name] = s
  return s
end

local function needOf(unit, amounts)
  if unit == 'requests' then return 1 end
  return tonumber(amounts[unit]) or 0
end

-- The room a key keeps after the job (its tightest limit's share left), or nil when it has none.
local function keyRoom(k, amounts, now)
  if k.bench > now then return nil end
  local room = 1
  for _, unit in ipairs(k.units) do
    local w = k.windows[unit]
    local left = w.cap - w.used - needOf(unit, amounts)
    if left < 0 then return nil end
    if left / w.max < room then room = left / w.max end
  end
  return room
end

-- When key k has room for the job again (nil: never, the amount is above a cap).
local function keyFreeAt(k, amounts, now)
  local at = k.bench > now and k.bench or now
  for _, unit in ipairs(k.units) do
    local w = k.windows[unit]
    local need = needOf(unit, amounts)
    if need > w.cap then return nil end
    local over = w.used + need - w.cap
    if over > 0 then
      table.sort(w.entries, function(a, b) return a[1] < b[1] end)
      local freed, due = 0, nil
      for _, e in ipairs(w.entries) do
        freed = freed + e[2]
        if freed >= over then
          due = e[1] + w.window
          break
        end
      end
      if not due then return nil end
      if due > at then at = due end
    end
  end
  return at
end

-- Add `n` of a unit to a window at `t` (merged into the newest positive entry when it is recent).
local function windowAdd(w, t, n)
  local newest = nil
  for i, e in ipairs(w.entries) do
    if not newest or e[1] > w.entries[newest][1] then newest = i end
  end
  local e = newest and w.entries[newest]
  if e and n > 0 and e[2] > 0 and e[1] >= t - w.window / LOG_MERGE and t >= e[1] then
    e[1] = t
    e[2] = e[2] + n
  else
    w.entries[#w.entries + 1] = {t, n}
  end
  w.used = w.used + n
  w.changed = true
end

-- Admission for one job's `uses` (JSON {resource: {unit: amount}}): for every resource, the key
-- with the most room; all reserved, or none. Returns the grant (JSON for the claim's reply), or
-- nil, the time to look again and the resource that refused.
local function resourceAdmit(states, jobPrefix, usesText, now)
  local ok, uses = pcall(cjson.decode, usesText)
  if not ok or type(uses) ~= 'table' then return nil, now + RESOURCE_RECHECK_MS, '?' end
  local names = {}
  for name in pairs(uses) do names[#names + 1] = name end
  table.sort(names)
  local chosen = {}
  for _, name in ipairs(names) do
    local s = resourceRead(states, jobPrefix, name, now)
    if not s then return nil, now + RESOURCE_RECHECK_MS, name end
    local amounts = type(uses[name]) == 'table' and uses[name] or {}
    local best, bestRoom = nil, -1
    for _, id in ipairs(s.ids) do
      local room = keyRoom(s.byId[id], amounts, s.now)
      if room and room > bestRoom then best, bestRoom = s.byId[id], room end
    end
    if not best then
      local due = nil
      for _, id in ipairs(s.ids) do
        local at = keyFreeAt(s.byId[id], amounts, s.now)
        if at and (not due or at < due) then due = at end
      end
      return nil, due or (now + RESOURCE_RECHECK_MS), name
    end
    chosen[#chosen + 1] = {name, s, best, amounts}
  end
  local grant = {}
  for _, c in ipairs(chosen) do
    local name, s, k, amounts = c[1], c[2], c[3], c[4]
    for _, unit in ipairs(k.units) do
      local need = needOf(unit, amounts)
      if need > 0 then windowAdd(k.windows[unit], s.now, need) end
    end
    k.admitted = k.admitted + 1
    local g = {key = k.id, at = s.now}
    for unit, amount in pairs(amounts) do g[unit] = tonumber(amount) end
    grant[name] = g
  end
  return cjson.encode(grant)
end

-- Take back `n` reserved at `at` (a usage report below the estimate) without undercounting and
-- without growing the log. The reservation lives in the oldest positive entry no older than `at`
-- (it was written at `at`, when no entry was newer, and merges only move an entry later): take
-- it from there (the rest leaves the window no earlier than the reservation would have). Else
-- into a negative entry at most window / LOG_MERGE older than `at` (it leaves earlier: the
-- window overcounts, never under), else as an entry of its own at `at`.
local function windowRelease(w, at, n)
  local pick, neg = nil, nil
  for i, e in ipairs(w.entries) do
    if e[1] >= at and e[2] > 0 and (not pick or e[1] < w.entries[pick][1]) then pick = i end
    if e[2] < 0 and e[1] <= at and e[1] >= at - w.window / LOG_MERGE then neg = i end
  end
  if pick and w.entries[pick][2] < n then pick = nil end
  if pick then
    w.entries[pick][2] = w.entries[pick][2] - n
  elseif neg then
    w.entries[neg][2] = w.entries[neg][2] - n
  else
    w.entries[#w.entries + 1] = {at, -n}
  end
  w.used = w.used - n
end

local function windowText(w, now)
  local parts = {}
  for _, e in ipairs(w.entries) do
    if e[1] > now - w.window and e[2] ~= 0 then parts[#parts + 1] = string.format('%d:%d', e[1], e[2]) end
  end
  return table.concat(parts, ',')
end

-- Write what this claim changed: one HSET of the changed logs per resource, one HINCRBY per key used.
local function resourcesFlush(states)
  for _, s in pairs(states) do
    if s then
      local fields = {}
      for _, id in ipairs(s.ids) do
        local k = s.byId[id]
        for _, unit in ipairs(k.units) do
          local w = k.windows[unit]
          if w.changed then
            fields[#fields + 1] = 'log:' .. id .. ':' .. unit
            fields[#fields + 1] = windowText(w, s.now)
          end
        end
        if k.admitted > 0 then redis.call('HINCRBY', s.key, 'admitted:' .. id, k.admitted) end
      end
      if #fields > 0 then redis.call('HSET', s.key, unpack(fields)) end
    end
  end
end

-- resource_usage: correct key `id` of the resource at `key` by ARGV pairs from `from` (unit,
-- delta; or '+bench', until). Returns the number of pairs applied, and whether room was freed.
local function resourceCorrect(key, id, at, now, args, from)
  local h = redis.call('HMGET', key, 'keys', 'limits:' .. id, 'bench:' .. id)
  if not h[1] or not h[2] then return 0 end
  local limits = {}
  for unit, limit in string.gmatch(h[2], '([^=,]+)=([^,]+)') do limits[unit] = limit end
  local fields, applied, freed = {}, 0, false
  for i = from, #args, 2 do
    local unit, value = args[i], tonumber(args[i + 1])
    if unit == '+bench' and value then
      if value > (tonumber(h[3] or 0) or 0) then
        fields[#fields + 1] = 'bench:' .. id
        fields[#fields + 1] = string.format('%d', value)
      end
      applied = applied + 1
    elseif limits[unit] and value and value ~= 0 then
      local logKey = 'log:' .. id .. ':' .. unit
      local w = parseWindow(limits[unit], redis.call('HGET', key, logKey), now)
      for _, e in ipairs(w.entries) do if e[1] > now then now = e[1] end end
      if value < 0 then
        -- (a reservation already out of the window needs no correction)
        if at > now - w.window then
          windowRelease(w, at, -value)
          freed = true
        end
      else
        windowAdd(w, now, value)
      end
      fields[#fields + 1] = logKey
      fields[#fields + 1] = windowText(w, now)
      applied = applied + 1
    end
  end
  if #fields > 0 then redis.call('HSET', key, unpack(fields)) end
  return applied, freed
end
