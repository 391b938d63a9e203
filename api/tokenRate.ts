// A named token's request rate (`rate: 50/s` in the tokens file), admitted in Redis so every
// replica shares it, on Redis' clock (queue/tokenRate.ts): at most `max` in any window, a burst
// of `max` and then one per window/max; one round trip per request of a limited token, nothing
// for the others.
import { admitTokenRequest, formatRateLimit, type RedisClient } from "../queue/index.ts";
import { HttpError } from "./http.ts";
import type { Principal } from "./tokens.ts";

export async function checkTokenRate(redis: RedisClient, who: Principal): Promise<void> {
  const rate = who.rate;
  if (!rate) return;
  const { admitted, retryAfterMs } = await admitTokenRequest(redis, who.name, rate);
  if (admitted) return;
  const wait = Math.max(1, Math.ceil(retryAfterMs / 1000));
  throw new HttpError(
    429,
    `token ${who.name} is over its rate limit of ${formatRateLimit(rate)} (all replicas together): try again in ${wait} s`,
    { "retry-after": String(wait) },
    null,
    "rate_limited",
  );
}
