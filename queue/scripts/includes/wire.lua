-- Named records on the wire (docs/protocol.md, "How the scripts are called"). A call's settings
-- and each job's fields travel as one JSON object (cjson): a field is named, an optional one is
-- left out (a JSON null counts as left out). A bulky text (a result, a job's data) follows its
-- record as its own argument: inside the record Redis would decode it byte by byte.

-- The record in `text`, or nil and the error reply's text naming `what` (ERR_INVALID_RECORD).
local function wireRecord(what, text)
  local ok, r = pcall(cjson.decode, text or '')
  if not ok or type(r) ~= 'table' or r[1] ~= nil then
    return nil, 'ERR_INVALID_RECORD ' .. what .. ' is not a JSON object: ' .. string.sub(tostring(text), 1, 120)
  end
  for k, v in pairs(r) do
    if v == cjson.null then r[k] = nil end
  end
  return r
end

-- Nil, or the error reply's text naming the first of `required` (field name, then 'string' or
-- 'number', for each field) that `r` lacks or holds as another type.
local function wireRequire(what, r, required)
  for i = 1, #required, 2 do
    local name, kind = required[i], required[i + 1]
    if type(r[name]) ~= kind then
      return 'ERR_INVALID_RECORD ' .. what .. ': field ' .. name .. ' must be a ' .. kind .. ', got ' .. (r[name] == nil and 'none' or type(r[name]))
    end
  end
  return nil
end

-- Nil, or the error reply's text naming the first of `optional` (field name, then its type, for
-- each field) that `r` holds as another type; a field left out is fine.
local function wireOptional(what, r, optional)
  for i = 1, #optional, 2 do
    local name, kind = optional[i], optional[i + 1]
    if r[name] ~= nil and type(r[name]) ~= kind then
      return 'ERR_INVALID_RECORD ' .. what .. ': field ' .. name .. ' must be a ' .. kind .. ', got ' .. type(r[name])
    end
  end
  return nil
end
