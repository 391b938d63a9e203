// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
// lease 15 s, renew deadline 10 s, retry 2 s. Expiry is judged by this process's own clock from
// the moment it last saw the lease record change (never by comparing clocks across machines).
// The leader stops writing as soon as it has not renewed for the renew deadline — before any
// standby may take over (lease duration > renew deadline) — and writes still in flight then are
// cut off (leadershipSignal), however long their own timeout.
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { RESOURCES, apiVersionOf, resourcePath } from "../apis/coordinates.ts";
import { isConflict, isNotFound, type KubeClient } from "./client.ts";

export interface LeaderElectionOptions {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  log?: Logger;
  onStartedLeading?: () => void;
  onStoppedLeading?: () => void;
}

interface Lease {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number;
    acquireTime?: string | null;
    renewTime?: string | null;
    leaseTransitions?: number;
  };
}

function abortedController(): AbortController {
  const c = new AbortController();
  c.abort(new Error("not leading"));
  return c;
}

/** MicroTime as the API wants it: RFC 3339 with microseconds. */
function microTime(d = new Date()): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

export class LeaderElector {
  private readonly client: KubeClient;
  private readonly options: Required<
    Omit<LeaderElectionOptions, "log" | "onStartedLeading" | "onStoppedLeading">
  > &
    LeaderElectionOptions;
  private observedRecord = "";
  private observedTime = 0;
  private lastRenew = 0;
  private leading = false;
  private stopped = false;
  private abort = new AbortController();
  private loopDone: Promise<void> | undefined;
  /** Aborted the moment leadership ends; a new one each time it starts. */
  private leadership = abortedController();
  /** Ends leadership at lastRenew + renewDeadline even while a renew request hangs. */
  private deadline: NodeJS.Timeout | undefined;

  constructor(client: KubeClient, opts: LeaderElectionOptions) {
    this.client = client;
    this.options = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...opts };
    if (this.options.leaseDurationMs <= this.options.renewDeadlineMs)
      throw new Error("leader election: lease duration must exceed the renew deadline");
  }

  /** True while this replica holds the lease and renewed it within the renew deadline. */
  isLeader(): boolean {
    return this.leading && Date.now() - this.lastRenew < this.options.renewDeadlineMs;
  }

  /** Aborts when this replica stops leading (writes in flight are cut off); aborted while not leading. */
  get leadershipSignal(): AbortSignal {
    return this.leadership.signal;
  }

  get identity(): string {
    return this.options.identity;
  }

  start(): void {
    this.loopDone ??= this.loop();
  }

  /** Stop; a leader releases the lease so a standby takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await this.loopDone;
    if (this.leading) {
      this.setLeading(false);
      await this.release().catch((err) =>
        this.options.log?.warn({ err: String(err) }, "could not release the leader lease"),
      );
    }
  }

  private get path(): string {
    return resourcePath(RESOURCES.leases, { namespace: this.options.namespace, name: this.options.name });
  }

  private setLeading(v: boolean): void {
    if (v === this.leading) return;
    this.leading = v;
    if (v) {
      this.leadership = new AbortController();
      this.options.log?.info({ lease: `${this.options.namespace}/${this.options.name}` }, "became leader");
      this.options.onStartedLeading?.();
    } else {
      clearTimeout(this.deadline);
      this.leadership.abort(new Error("leadership lost"));
      this.options.log?.warn({ lease: `${this.options.namespace}/${this.options.name}` }, "stopped leading");
      this.options.onStoppedLeading?.();
    }
  }

  private async pause(ms: number): Promise<void> {
    try {
      await sleep(ms, undefined, { signal: this.abort.signal });
    } catch {
      // stopped
    }
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let ok = false;
      try {
        ok = await this.tryAcquireOrRenew();
      } catch (err) {
        this.options.log?.warn({ err: String(err) }, "leader election: lease request failed");
      }
      if (ok) {
        this.lastRenew = Date.now();
        this.setLeading(true);
        clearTimeout(this.deadline);
        // +1: a timer's clock and Date.now() may disagree by a millisecond.
        this.deadline = setTimeout(() => this.loseIfExpired(), this.options.renewDeadlineMs + 1);
        this.deadline.unref();
      } else if (this.leading && Date.now() - this.lastRenew >= this.options.renewDeadlineMs) {
        this.setLeading(false);
      }
      // A candidate retries with jitter (client-go: JitterFactor 1.2); a leader renews every retry period.
      await this.pause(
        this.leading ? this.options.retryPeriodMs : this.options.retryPeriodMs * (1 + Math.random() * 1.2),
      );
    }
  }

  private loseIfExpired(): void {
    if (this.leading && Date.now() - this.lastRenew >= this.options.renewDeadlineMs) this.setLeading(false);
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = new Date();
    const current = await this.client.get<Lease>(this.path);
    if (!current) {
      try {
        await this.client.create(resourcePath(RESOURCES.leases, { namespace: this.options.namespace }), {
          apiVersion: apiVersionOf(RESOURCES.leases),
          kind: RESOURCES.leases.kind,
          metadata: { name: this.options.name, namespace: this.options.namespace },
          spec: {
            holderIdentity: this.options.identity,
            leaseDurationSeconds: Math.round(this.options.leaseDurationMs / 1000),
            acquireTime: microTime(now),
            renewTime: microTime(now),
            leaseTransitions: 0,
          },
        });
      } catch (err) {
        if (isConflict(err) || (err as { code?: number }).code === 409) return false;
        throw err;
      }
      this.observedTime = Date.now();
      return true;
    }
    const spec = current.spec ?? {};
    const record = JSON.stringify([
      spec.holderIdentity,
      spec.renewTime,
      spec.acquireTime,
      spec.leaseTransitions,
    ]);
    if (record !== this.observedRecord) {
      this.observedRecord = record;
      this.observedTime = Date.now();
    }
    const holder = spec.holderIdentity ?? "";
    const duration = (spec.leaseDurationSeconds ?? this.options.leaseDurationMs / 1000) * 1000;
    const mine = holder === this.options.identity;
    if (holder && !mine && this.observedTime + duration > Date.now()) return false;
    const next: Lease = {
      ...current,
      spec: {
        holderIdentity: this.options.identity,
        leaseDurationSeconds: Math.round(this.options.leaseDurationMs / 1000),
        acquireTime: mine ? (spec.acquireTime ?? microTime(now)) : microTime(now),
        renewTime: microTime(now),
        leaseTransitions: mine ? (spec.leaseTransitions ?? 0) : (spec.leaseTransitions ?? 0) + 1,
      },
    };
    try {
      await this.client.update(this.path, next);
    } catch (err) {
      if (isConflict(err) || isNotFound(err)) return false;
      throw err;
    }
    this.observedRecord = JSON.stringify([
      next.spec.holderIdentity,
      next.spec.renewTime,
      next.spec.acquireTime,
      next.spec.leaseTransitions,
    ]);
    this.observedTime = Date.now();
    return true;
  }

  private async release(): Promise<void> {
    const current = await this.client.get<Lease>(this.path);
    if (!current || current.spec?.holderIdentity !== this.options.identity) return;
    await this.client.update(this.path, {
      ...current,
      spec: {
        ...current.spec,
        holderIdentity: null,
        leaseDurationSeconds: 1,
        renewTime: microTime(),
        acquireTime: microTime(),
      },
    });
  }
}
