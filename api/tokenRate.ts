// A named token's request rate (`rate: 50/s` in the tokens file), counted in Redis so every
// replica shares it: one counter per token and fixed window (INCR, expiring with the window).
// A fixed window lets a client reach twice the rate across a window's edge; it costs one round
// trip per request of a limited token and nothing for the others.
import { formatRateLimit, TOKEN_RATE_PREFIX, type RedisClient } from "../queue/index.ts";
import { HttpError } from "./http.ts";
import type { Principal } from "./tokens.ts";

export async function checkTokenRate(redis: RedisClient, who: Principal, now = Date.now()): Promise<void> {
  const rate = who.rate;
  if (!rate) return;
  const window = Math.floor(now / rate.perMs);
  const key = `${TOKEN_RATE_PREFIX}${who.name}:${window}`;
  const [[, count]] = (await redis.multi().incr(key).pexpire(key, rate.perMs).exec()) as [
    [Error | null, number],
    [Error | null, number],
  ];
  if (count <= rate.max) return;
  const wait = Math.max(1, Math.ceil(((window + 1) * rate.perMs - now) / 1000));
  throw new HttpError(
    429,
    `token ${who.name} is over its rate limit of ${formatRateLimit(rate)} (all replicas together): try again in ${wait} s`,
    { "retry-after": String(wait) },
    null,
    "rate_limited",
  );
}
