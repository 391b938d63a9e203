// Human durations for flags and env vars: "250ms", "10s", "5m", "1h", or plain milliseconds.
export class DurationError extends Error {
  override name = "DurationError";
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export function parseDuration(text: string, what = "duration"): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!m)
    throw new DurationError(`invalid ${what} ${JSON.stringify(text)}: expected e.g. 500ms, 10s, 5m, 1h`);
  return Math.round(Number(m[1]) * UNIT_MS[m[2] ?? "ms"]!);
}
