// The demos' environment knobs (DEMO_JOBS, DEMO_JOB_MS): a bad value names itself and exits 2.

/** `process.env[name]` as a positive integer (`fallback` when unset); otherwise says why and exits 2. */
export function positiveEnv(name: string, fallback: number, say: (line: string) => void): number {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v <= 0) {
    say(`${name}=${process.env[name]}: expected a positive integer`);
    process.exit(2);
  }
  return v;
}
