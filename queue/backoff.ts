// Retry delays: exponential with "full jitter" (a uniform draw up to the exponential bound),
// capped — so retries of a failing dependency spread out instead of arriving in waves.
export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 1000, maxMs: 5 * 60_000 };

/** Delay before the retry that follows failed attempt number `attempt` (1-based). */
export function retryDelay(
  attempt: number,
  policy: BackoffPolicy = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  const bound = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.floor(random() * bound);
}
