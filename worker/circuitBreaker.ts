// The worker's circuit breaker: after `threshold` consecutive dependency failures the worker
// stops claiming for a back-off period (doubling while the dependency stays down), then lets a
// single job through (half-open); its success closes the circuit.
import { Backoff } from "../lib/backoff.ts";

export type CircuitState = "closed" | "open" | "half-open";

export class CircuitBreaker {
  state: CircuitState = "closed";
  openUntil = 0;
  private consecutive = 0;
  private readonly backoff: Backoff;
  private readonly threshold: number;
  private readonly onChange: (state: CircuitState, detail: { failures: number; pauseMs: number }) => void;

  constructor(threshold: number, baseMs: number, onChange: CircuitBreaker["onChange"]) {
    this.threshold = threshold;
    this.backoff = new Backoff({ baseMs, maxMs: baseMs * 10 });
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
      this.backoff.reset();
      this.set("closed", 0);
    }
  }

  dependencyFailure(now = Date.now()): void {
    this.consecutive++;
    if (!this.enabled) return;
    if (this.state === "half-open" || (this.state === "closed" && this.consecutive >= this.threshold)) {
      const pause = this.backoff.next();
      this.openUntil = now + pause;
      this.set("open", pause);
    }
  }

  private set(state: CircuitState, pauseMs: number): void {
    this.state = state;
    this.onChange(state, { failures: this.consecutive, pauseMs });
  }
}
