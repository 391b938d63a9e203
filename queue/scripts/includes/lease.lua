-- The fencing check: only the holder of the current lease token may act on a job.
local function leaseHeld(current, token)
  return current ~= false and current ~= '' and current == token
end
local function holdsLease(jk, token)
  return leaseHeld(redis.call('HGET', jk, 'token'), token)
end
