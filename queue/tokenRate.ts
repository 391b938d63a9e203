// The job API's per-token request rate, shared by every replica through Redis (token_rate.lua).
import { tokenRate } from "./gateway.ts";
import { TOKEN_RATE_PREFIX } from "./keys.ts";
import type { RedisClient } from "./scripts.ts";

/** One request of token `name` against `max` per `perMs`: admitted, or how long until one fits. */
export function admitTokenRequest(
  redis: RedisClient,
  name: string,
  rate: { max: number; perMs: number },
): Promise<{ admitted: boolean; retryAfterMs: number }> {
  return tokenRate(redis, { key: `${TOKEN_RATE_PREFIX}${name}`, max: rate.max, perMs: rate.perMs });
}
