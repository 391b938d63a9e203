// Human durations for every flag and environment variable: "250ms", "30s", "5m", "1h"; a bare
// number is seconds (as in the *_SECONDS variables), decimals allowed ("0.5" = 500 ms).
export class DurationError extends Error {
  override name = "DurationError";
}

/** The one line every --help prints about durations. */
export const DURATION_HELP = "Durations: 250ms, 30s, 5m, 1h; a bare number is seconds.";

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds. */
export function parseDuration(text: string, what = "duration"): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!m)
    throw new DurationError(
      `invalid ${what} ${JSON.stringify(text)}: expected e.g. 250ms, 30s, 5m, 1h or seconds`,
    );
  return Math.round(Number(m[1]) * UNIT_MS[m[2] ?? "s"]!);
}
