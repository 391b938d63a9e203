// The median duration of this worker's recent completed jobs, reported in its heartbeat so the
// operator can size a rate-limited pool (replicas the rate can feed ≈ rate × p50 / concurrency).
// Recomputed every few completions, not per job: a sort of a small window.

const WINDOW = 64;
const RECOMPUTE_EVERY = 16;

export class JobDurations {
  private readonly recent: number[] = [];
  private readonly scratch = new Float64Array(WINDOW);
  private next = 0;
  private sinceRecompute = 0;
  private median = 0;
  private readonly onChange: (p50Ms: number) => void;

  constructor(onChange: (p50Ms: number) => void) {
    this.onChange = onChange;
  }

  /** A completed job took `ms`. */
  add(ms: number): void {
    if (this.recent.length < WINDOW) this.recent.push(ms);
    else this.recent[this.next] = ms;
    this.next = (this.next + 1) % WINDOW;
    // The first few completions report at once, then every RECOMPUTE_EVERY.
    if (++this.sinceRecompute < RECOMPUTE_EVERY && this.recent.length >= RECOMPUTE_EVERY) return;
    this.sinceRecompute = 0;
    // Sorted in a reused typed array (numeric order, no comparator): no garbage per recompute.
    const n = this.recent.length;
    const sorted = this.scratch.subarray(0, n);
    sorted.set(this.recent);
    sorted.sort();
    const m = Math.round(sorted[Math.floor((n - 1) / 2)]!);
    if (m !== this.median) this.onChange((this.median = m));
  }

  /** The median of the last completions (ms); 0 before the first. */
  get p50Ms(): number {
    return this.median;
  }
}
