// Waiting for a condition instead of sleeping a guessed time: the one polling helper of tests,
// harnesses, bench and chaos.
import { setTimeout as sleep } from "node:timers/promises";

export interface PollOptions {
  /** Give up after this long (default 2 min). */
  timeoutMs?: number;
  /** Time between probes (default 100 ms). */
  intervalMs?: number;
  /** Extra diagnostics appended to the timeout error. */
  onTimeout?: () => Promise<string> | string;
}

/**
 * Calls `probe` until it returns a truthy value and returns that value; after `timeoutMs` throws
 * an error naming `what` and the probe's last error.
 */
export async function pollUntil<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  opts: PollOptions = {},
): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
      lastErr = undefined;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > deadline) {
      let detail =
        lastErr === undefined ? "" : `: ${lastErr instanceof Error ? lastErr.message : String(lastErr)}`;
      if (opts.onTimeout) {
        try {
          detail += `\n${await opts.onTimeout()}`;
        } catch (err) {
          detail += `\n(diagnostics failed: ${(err as Error).message})`;
        }
      }
      throw new Error(`timed out waiting for ${what}${detail}`, { cause: lastErr });
    }
    await sleep(opts.intervalMs ?? 100);
  }
}
