-- The claim's keys by name. CLAIM_KEYS is the order of claim_jobs' KEYS (the gateway's CLAIM_KEYS
-- in queue/gateway.ts sends them in the same order); every claim reads them as `keys.<name>`.
-- Each key is its name after the queue's prefix Q, or the pipeline's P for those in
-- CLAIM_PIPELINE_KEYS.
local CLAIM_KEYS = {'ready', 'delayed', 'inflight', 'dead', 'counts', 'fence', 'wake', 'outbox', 'meta', 'contract'}
local CLAIM_PIPELINE_KEYS = {fence = true, outbox = true, meta = true}

-- Takes claim_jobs' KEYS; returns them by name.
local function claimKeysOf(list)
  local keys = {}
  for i, name in ipairs(CLAIM_KEYS) do keys[name] = list[i] end
  return keys
end

-- Takes the pipeline's prefix P and the queue's Q (keys.lua); returns the claim's keys by name
-- (complete-and-claim names them itself: they are in the declared keys' slot).
local function claimKeysFor(base, q)
  local keys = {}
  for _, name in ipairs(CLAIM_KEYS) do keys[name] = (CLAIM_PIPELINE_KEYS[name] and base or q) .. name end
  return keys
end
