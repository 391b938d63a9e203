// Delays that grow after each failure: exponential with a cap, and — for job retries — "full
// jitter" (a uniform draw up to the exponential bound), so retries of a failing dependency
// spread out instead of arriving in waves.
export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 1000, maxMs: 5 * 60_000 };

/** baseMs·2^(n-1), capped at maxMs: the bound after failure number `n` (1-based). */
export function exponentialDelay(n: number, policy: BackoffPolicy): number {
  return Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(Math.max(0, n - 1), 30));
}

/** Delay before the retry that follows failed attempt number `attempt` (1-based). */
export function retryDelay(
  attempt: number,
  policy: BackoffPolicy = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  return Math.floor(random() * exponentialDelay(attempt, policy));
}

/** A loop's failure streak: `next()` gives baseMs, then doubles up to maxMs; `reset()` after a success. */
export class Backoff {
  private failures = 0;
  private readonly policy: BackoffPolicy;
  constructor(policy: BackoffPolicy) {
    this.policy = policy;
  }

  next(): number {
    return exponentialDelay(++this.failures, this.policy);
  }

  reset(): void {
    this.failures = 0;
  }
}
