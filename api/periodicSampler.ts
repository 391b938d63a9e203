// What the API's history samplers share (resources, rollouts): `sample()` once at start and every
// interval after, unref'd (it never holds the process open); stop() waits for a sample in flight.
import type { Logger } from "pino";
import type { RedisClient } from "../queue/index.ts";

export abstract class PeriodicSampler {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  protected readonly redis: RedisClient;
  readonly intervalMs: number;
  protected readonly log?: Logger;
  private readonly onError?: (err: unknown) => void;

  constructor(redis: RedisClient, intervalMs: number, log?: Logger, onError?: (err: unknown) => void) {
    this.redis = redis;
    this.intervalMs = intervalMs;
    this.log = log;
    this.onError = onError;
  }

  /** One sample, its time rounded down to the interval. */
  abstract sample(now?: number): Promise<void>;

  start(): void {
    const tick = () => {
      this.running = this.sample().catch((err: unknown) => this.onError?.(err));
    };
    tick();
    this.timer = setInterval(tick, this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
