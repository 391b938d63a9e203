// The worker's circuit breaker: after `threshold` consecutive dependency failures the worker
// stops claiming for a back-off period (doubling while the dependency stays down), then lets a
// single job through (half-open); its success closes the circuit.
export type CircuitState = "closed" | "open" | "half-open";

export class CircuitBreaker {
  state: CircuitState = "closed";
  openUntil = 0;
  private consecutive = 0;
  private backoffMs: number;
  private readonly threshold: number;
  private readonly baseMs: number;
  private readonly onChange: (state: CircuitState, detail: { failures: number; pauseMs: number }) => void;

  constructor(threshold: number, baseMs: number, onChange: CircuitBreaker["onChange"]) {
    this.threshold = threshold;
    this.baseMs = baseMs;
    this.backoffMs = baseMs;
    this.onChange = onChange;
  }

  get enabled(): boolean {
    return this.threshold > 0;
  }

  /** How many jobs may be claimed now, given `free` slots. */
  allowance(free: number, now = Date.now()): number {
    if (this.state === "closed") return free;
    if (this.state === "open" && now >= this.openUntil) this.set("half-open", 0);
    return this.state === "half-open" ? Math.min(free, 1) : 0;
  }

  success(): void {
    this.consecutive = 0;
    if (this.state !== "closed") {
      this.backoffMs = this.baseMs;
      this.set("closed", 0);
    }
  }

  dependencyFailure(now = Date.now()): void {
    this.consecutive++;
    if (!this.enabled) return;
    if (this.state === "half-open" || (this.state === "closed" && this.consecutive >= this.threshold)) {
      const pause = this.backoffMs;
      this.openUntil = now + pause;
      this.backoffMs = Math.min(this.backoffMs * 2, this.baseMs * 10);
      this.set("open", pause);
    }
  }

  private set(state: CircuitState, pauseMs: number): void {
    this.state = state;
    this.onChange(state, { failures: this.consecutive, pauseMs });
  }
}
