// Backlog polling: every pool's queue counts are read every pollSeconds, over the shared Redis
// connections of redisConnections.ts. A sample is what the external metric serves, what scaling
// decisions use and what status shows. Credentials never appear in logs, errors or samples.
import type { Logger } from "pino";
import {
  QueueAdmin,
  type Contract,
  groupAdmission,
  listResources,
  pollQueues,
  polledQueue,
  waitUntilReady,
  type GroupAdmission,
  type PolledQueue,
  type QueueControlState,
  type QueueCounts,
  type RateLimit,
  type RedisClient,
  type ResourceState,
  type VersionCounters,
  type WorkerReport,
  type FinalizeResult,
  type LayoutInForce,
  type LayoutStatus,
} from "../../queue/index.ts";
import { Doorbells } from "./doorbell.ts";
import type { AuditOutcome } from "../../queue/audit.ts";
import * as writes from "./poolWrites.ts";
import type { ResourceBudgetSpec } from "./poolWrites.ts";
import { redactError, withTimeout, type RedisConnections } from "./redisConnections.ts";

export interface BacklogSample {
  /** When the poll finished (ms). */
  at: number;
  /** The queue polled. */
  queue?: string;
  counts?: QueueCounts;
  /** Set when the poll failed; the message is safe to show. */
  error?: string;
  /** Consecutive failed polls. */
  failures: number;
  /** The last good counts and when they were read. */
  lastGood?: { at: number; counts: QueueCounts };
  /** Pause and rate limit in force in Redis at the last good poll. */
  control?: QueueControlState;
  /**
   * The poll read the queue paused before its counts: no claim can follow them, so the in-flight
   * count covers every job still running. Only a poll sets it (applyControl updates `control`).
   */
  pausedWhenCounted?: boolean;
  /** While rate-limited, in latency mode or with resources: the workers' reports, for the median job duration (queueControl.ts). */
  reports?: WorkerReport[];
  /** While jobs wait in groups: how many of them could start now (the groups' replica cap). */
  groups?: GroupAdmission;
  /** The pipeline's resources (PollTarget.resources): keys, limits, windows, benches, waiting jobs. */
  resources?: ResourceState[];
}

export interface PollTarget {
  key: string;
  queue: string;
  /** Effective URL (TLS applied), no password. */
  url: string;
  password?: string;
  pollSeconds: number;
  /** Read the workers' reports with every poll (latency mode), not only while rate-limited. */
  reports?: boolean;
  /** The most jobs the pool can run at once (maxReplicas × concurrency): the groups' read stops there. */
  maxSlots?: number;
  /** The pool has spec.resources: each poll also reads its pipeline's resources and worker reports. */
  resources?: boolean;
}

export interface PollerHooks {
  /** Called after every poll (success or failure) of a pool, with the sample it replaced. */
  onSample: (key: string, sample: BacklogSample, previous: BacklogSample | undefined) => void;
  /** The leader also runs the lease sweeper (requeues expired leases even with no workers running). */
  shouldSweep: () => boolean;
  /** A pool's bell rang (a job arrived at a sleeping pool, or a surge at a running one): it is polled now. */
  onRing?: (key: string) => void;
}

interface PoolPoll {
  target: PollTarget;
  /** Its queue's part of the poll's calls, made once. */
  polled: PolledQueue;
  connId: string;
  client: RedisClient;
  group: PollGroup;
  sample?: BacklogSample;
  /** Rings heard for the pool. */
  rings: number;
  /**
   * The rings heard when the poll that took `sample` started; undefined for a sample carried
   * over from the pool's previous Redis or queue. A sample from before a ring may predate the
   * job that rang: it never leaves a bell.
   */
  sampleRings?: number;
  /** The operator's last word on the pool: it sleeps at zero (bell "asleep"). */
  asleep: boolean;
}

/** The pools sharing one Redis connection and one poll interval: polled together, one round trip. */
interface PollGroup {
  id: string;
  connId: string;
  client: RedisClient;
  url: string;
  pollSeconds: number;
  keys: Set<string>;
  timer?: NodeJS.Timeout;
  /** Pools to poll as soon as possible (new ones), apart from the interval. */
  soon: Set<string>;
  soonTimer?: NodeJS.Timeout;
  inFlight: boolean;
}

/** What one poll of a group read: each pool's counts, and its reports, groups and resources when read. */
interface PollRead {
  polls: Awaited<ReturnType<typeof pollQueues>>;
  reports: (WorkerReport[] | Error | undefined)[];
  admissions: (GroupAdmission | Error | undefined)[];
  resources: (ResourceState[] | Error | undefined)[];
}

/**
 * Polls every registered pool on its interval. Pools on the same Redis (URL + credentials) with
 * the same interval are polled together: one pipeline, so one round trip per Redis server per
 * interval whatever the number of pools (docs/performance.md#operator).
 */
export class BacklogPoller {
  private readonly pools = new Map<string, PoolPoll>();
  private readonly groups = new Map<string, PollGroup>();
  private readonly conns: RedisConnections;
  private readonly hooks: PollerHooks;
  private readonly log?: Logger;
  private readonly timeoutMs: number;
  private readonly doorbells: Doorbells;

  constructor(conns: RedisConnections, hooks: PollerHooks, opts: { log?: Logger; timeoutMs?: number } = {}) {
    this.conns = conns;
    this.hooks = hooks;
    this.log = opts.log;
    this.timeoutMs = opts.timeoutMs ?? 5000;
    this.doorbells = new Doorbells((key) => this.rung(key), { log: opts.log, timeoutMs: this.timeoutMs });
  }

  /** Start or update polling of a pool (a changed URL, password or interval takes effect now). */
  upsert(target: PollTarget): void {
    const cur = this.pools.get(target.key);
    if (
      cur &&
      cur.target.url === target.url &&
      cur.target.password === target.password &&
      cur.target.queue === target.queue &&
      cur.target.pollSeconds === target.pollSeconds
    ) {
      // (whether to read reports and resources, and maxSlots, are read from the target at each poll)
      cur.target = target;
      return;
    }
    if (cur) this.remove(target.key);
    const { id, client } = this.conns.acquire(target.key, target.url, target.password);
    const group = this.group(id, client, target);
    const p: PoolPoll = {
      target,
      polled: polledQueue(target.queue),
      connId: id,
      client,
      group,
      sample: cur?.sample,
      rings: 0,
      asleep: false,
    };
    this.pools.set(target.key, p);
    group.keys.add(target.key);
    this.pollSoon(group, target.key);
  }

  remove(key: string): void {
    const p = this.pools.get(key);
    if (!p) return;
    this.pools.delete(key);
    this.doorbells.remove(key);
    const g = p.group;
    g.keys.delete(key);
    g.soon.delete(key);
    if (g.keys.size === 0) {
      clearTimeout(g.timer);
      clearTimeout(g.soonTimer);
      this.groups.delete(g.id);
    }
    this.conns.release(key, p.connId);
  }

  has(key: string): boolean {
    return this.pools.has(key);
  }

  sample(key: string): BacklogSample | undefined {
    return this.pools.get(key)?.sample;
  }

  /** Worker busy/idle reports of a pool's queue (for pod-deletion-cost). */
  async workers(key: string): Promise<WorkerReport[]> {
    const p = this.pools.get(key);
    return p ? writes.workers(p, this.timeoutMs) : [];
  }

  /** Cordon exactly `pods` of the pool's queue until `untilMs`: they claim nothing new (none: lift it). */
  async cordon(key: string, pods: readonly string[], untilMs: number): Promise<void> {
    const p = this.pools.get(key);
    if (p) await writes.cordon(p, pods, untilMs, this.timeoutMs);
  }

  /** Switch job records on for the pool's pipeline; whether this call did, undefined when not polled. */
  async enableRecords(key: string): Promise<boolean | undefined> {
    const p = this.pools.get(key);
    return p ? writes.enableRecords(p, this.timeoutMs) : undefined;
  }

  /** Write spec.paused / spec.rateLimit into the pool's Redis (the spec wins while set). */
  async applyControl(key: string, change: { paused?: boolean; rateLimit?: RateLimit }): Promise<void> {
    const p = this.pools.get(key);
    if (p) await writes.applyControl(p, change, this.timeoutMs);
  }

  /** Write spec.resources into the pool's pipeline (key ids and limits only: never a credential). */
  async applyResources(key: string, budgets: ResourceBudgetSpec[]): Promise<void> {
    const p = this.pools.get(key);
    if (p) await writes.applyResources(p, budgets, this.timeoutMs);
  }

  /** The hash and source of the contract in force on the pool's queue (null: none), undefined when not polled. */
  async contractInForce(key: string): Promise<{ hash: string; source: string } | null | undefined> {
    const p = this.pools.get(key);
    return p ? writes.contractInForce(p, this.timeoutMs) : undefined;
  }

  /** Every template version's outcome counters on the pool's queue; undefined when not polled. */
  async versionCounters(key: string): Promise<Map<string, VersionCounters> | undefined> {
    const p = this.pools.get(key);
    return p ? writes.versionCounters(p, this.timeoutMs) : undefined;
  }

  /** Set the pool's queue's contract; false when not polled. */
  async publishContract(key: string, contract: Contract, source: string): Promise<boolean> {
    const p = this.pools.get(key);
    if (!p) return false;
    await writes.publishContract(p, contract, source, this.timeoutMs);
    return true;
  }

  /** Delete the pool's queue's contract if `source` set it; whether it was, undefined when not polled. */
  async deleteContractOf(key: string, source: string): Promise<boolean | undefined> {
    const p = this.pools.get(key);
    return p ? writes.deleteContractOf(p, source, this.timeoutMs) : undefined;
  }

  /** The layout in force of the pool's pipeline; undefined when not polled. */
  async layoutInForce(key: string): Promise<LayoutInForce | undefined> {
    const p = this.pools.get(key);
    return p ? writes.layoutInForce(p, this.timeoutMs) : undefined;
  }

  /** The pool's pipeline's layout and live readers; undefined when not polled. */
  async pipelineLayout(key: string): Promise<LayoutStatus | undefined> {
    const p = this.pools.get(key);
    return p ? writes.pipelineLayout(p, this.timeoutMs) : undefined;
  }

  /** Finalize the pool's pipeline's layout; undefined when not polled. */
  async finalizeLayout(key: string, by: string): Promise<FinalizeResult | undefined> {
    const p = this.pools.get(key);
    return p ? writes.finalizeLayout(p, by, this.timeoutMs) : undefined;
  }

  /** One of the operator's own changes to the pool's pipeline into its audit stream (poolWrites.ts). */
  async audit(key: string, d: writes.OperatorDecision, outcome: AuditOutcome): Promise<void> {
    const p = this.pools.get(key);
    if (p) await writes.audit(p, d, outcome, this.timeoutMs);
  }

  /** Report this operator as a reader of the layouts in the pool's Redis. */
  async reportReader(key: string, id: string): Promise<void> {
    const p = this.pools.get(key);
    if (p) await writes.reportReader(p, id, this.timeoutMs);
  }

  /** Poll a pool now (e.g. right after it was created), without waiting for its interval. */
  pollNow(key: string): void {
    const p = this.pools.get(key);
    if (p) this.pollSoon(p.group, key);
  }

  stop(): void {
    for (const key of [...this.pools.keys()]) this.remove(key);
    this.doorbells.stop();
  }

  /**
   * The pool's bell: `"asleep"` while it sleeps at zero — the first job enqueued into its empty
   * queue, or a resume, polls it at once instead of at its next interval (doorbell.ts); a number
   * while it runs in latency mode — a wake that finds that many jobs waiting polls it at once (a
   * surge bell); undefined for none.
   */
  bell(key: string, want: "asleep" | number | undefined): void {
    const p = this.pools.get(key);
    if (p) p.asleep = want === "asleep";
    if (!p || want === undefined) return this.doorbells.wake(key);
    if (want !== "asleep") return void this.doorbells.surge(this.bellTarget(p), want);
    this.sleep(p);
  }

  private bellTarget(p: PoolPoll) {
    const { key, queue, url, password } = p.target;
    return { key, queue, connId: p.connId, client: p.client, url, password };
  }

  /** Nothing waits in the pool's queue, as its latest sample read after its last ring says. */
  private idle(p: PoolPoll): boolean {
    return p.sample?.counts?.backlog === 0 && p.sampleRings === p.rings;
  }

  /** The pool sleeps at zero: it listens for its bell, and leaves one when idle. */
  private sleep(p: PoolPoll): void {
    void this.doorbells
      .sleep(this.bellTarget(p), this.idle(p))
      // A job enqueued after the last poll and before the bell rang nothing: poll once more.
      .then(
        (armedNow) => armedNow && this.pools.get(p.target.key) === p && this.pollSoon(p.group, p.target.key),
      );
  }

  private rung(key: string): void {
    const p = this.pools.get(key);
    if (!p) return;
    // Every sample taken before now may predate the job that rang.
    p.rings++;
    this.hooks.onRing?.(key);
    this.pollSoon(p.group, key);
  }

  private group(connId: string, client: RedisClient, target: PollTarget): PollGroup {
    const id = `${connId}/${target.pollSeconds}`;
    let g = this.groups.get(id);
    if (!g) {
      g = {
        id,
        connId,
        client,
        url: target.url,
        pollSeconds: target.pollSeconds,
        keys: new Set(),
        soon: new Set(),
        inFlight: false,
      };
      this.groups.set(id, g);
      this.armInterval(g);
    }
    return g;
  }

  private armInterval(g: PollGroup): void {
    clearTimeout(g.timer);
    g.timer = setTimeout(() => {
      if (this.groups.get(g.id) !== g) return;
      this.armInterval(g);
      // A poll still running (a slow Redis) is not doubled: this interval is skipped.
      if (!g.inFlight) void this.poll(g, [...g.keys]);
    }, g.pollSeconds * 1000);
    g.timer.unref();
  }

  /** Many pools added at once (a start, a relist) coalesce into one poll. */
  private pollSoon(g: PollGroup, key: string): void {
    g.soon.add(key);
    if (g.soonTimer || g.inFlight) return;
    g.soonTimer = setTimeout(() => {
      g.soonTimer = undefined;
      if (this.groups.get(g.id) !== g || g.inFlight) return;
      const keys = [...g.soon];
      g.soon.clear();
      void this.poll(g, keys);
    }, 0);
    g.soonTimer.unref();
  }

  private async poll(g: PollGroup, keys: string[]): Promise<void> {
    const pools = keys.map((k) => this.pools.get(k)).filter((p): p is PoolPoll => p?.group === g);
    if (pools.length === 0) return;
    const previous = pools.map((p) => p.sample);
    const rings = pools.map((p) => p.rings);
    g.inFlight = true;
    try {
      const read = await this.read(g, pools);
      const now = Date.now();
      pools.forEach((p, i) => this.record(p, read, i, rings[i]!, now));
    } catch (err) {
      const now = Date.now();
      for (const p of pools) this.failed(p, err, now);
    } finally {
      g.inFlight = false;
    }
    this.deliver(pools, previous);
    // Pools added while this poll ran.
    if (g.soon.size > 0 && this.groups.get(g.id) === g) {
      const next = [...g.soon];
      g.soon.clear();
      for (const k of next) this.pollSoon(g, k);
    }
  }

  /** One round trip for the group's counts, then what some pools also need, in parallel. */
  private async read(g: PollGroup, pools: PoolPoll[]): Promise<PollRead> {
    // A new or reconnecting connection: wait for it rather than fail (fail-fast clients queue nothing).
    await waitUntilReady(g.client, g.url, this.timeoutMs);
    const polls = await withTimeout(
      pollQueues(
        g.client,
        pools.map((p) => p.polled),
        { sweep: this.hooks.shouldSweep() },
      ),
      this.timeoutMs,
      "queue counts",
    );
    // A failure of these fails that pool's poll only.
    const each = <T>(what: string, read: (p: PoolPoll, i: number) => Promise<T> | undefined) =>
      Promise.all(
        pools.map((p, i) => {
          const reading = read(p, i);
          return reading
            ? withTimeout(reading, this.timeoutMs, what).catch((err: unknown) =>
                err instanceof Error ? err : new Error(String(err)),
              )
            : undefined;
        }),
      );
    const [reports, admissions, resources] = await Promise.all([
      // Rate-limited and latency-mode pools and pools with resources also need the workers'
      // reports (one more round trip each: HGETALL of the workers hash).
      each("worker reports", (p, i) =>
        polls[i]!.control?.rateLimit || p.target.reports || p.target.resources
          ? new QueueAdmin(p.client).workers(p.target.queue)
          : undefined,
      ),
      // Pools with jobs waiting in groups: how many could start (a bounded read, group_admission).
      each("group admission", (p, i) =>
        (polls[i]!.groupedWaiting ?? 0) > 0
          ? groupAdmission(p.client, p.target.queue, p.target.maxSlots ?? Number.MAX_SAFE_INTEGER)
          : undefined,
      ),
      // Pools with resources: their pipeline's resources.
      each("resources", (p) => (p.target.resources ? listResources(p.client, p.target.queue) : undefined)),
    ]);
    return { polls, reports, admissions, resources };
  }

  /** The pool's sample from its part of the poll (`rings`: heard when the poll started). */
  private record(p: PoolPoll, read: PollRead, i: number, rings: number, now: number): void {
    const r = read.polls[i]!;
    const report = read.reports[i];
    const groups = read.admissions[i];
    const resource = read.resources[i];
    if (report instanceof Error || groups instanceof Error || resource instanceof Error) {
      this.failed(
        p,
        [report, groups, resource].find((x): x is Error => x instanceof Error)!,
        now,
      );
    } else if (r.counts && r.control) {
      p.sample = {
        at: now,
        queue: p.target.queue,
        counts: r.counts,
        failures: 0,
        lastGood: { at: now, counts: r.counts },
        control: r.control,
        pausedWhenCounted: r.control.paused,
        ...(report ? { reports: report } : {}),
        ...(groups ? { groups } : {}),
        ...(resource ? { resources: resource } : {}),
      };
      p.sampleRings = rings;
    } else {
      this.failed(p, r.error, now);
    }
    // Best effort: the mutex makes concurrent sweeps by workers no-ops.
    if (r.sweep instanceof Error)
      this.log?.debug(
        { pool: p.target.key, err: redactError(r.sweep, p.target.password) },
        "lease sweep failed",
      );
  }

  /** Each pool's new sample to the hooks; a bell again for an asleep pool a ring found idle. */
  private deliver(pools: PoolPoll[], previous: (BacklogSample | undefined)[]): void {
    for (const [i, p] of pools.entries()) {
      if (this.pools.get(p.target.key) !== p || !p.sample) continue;
      try {
        this.hooks.onSample(p.target.key, p.sample, previous[i]);
      } catch (err) {
        this.log?.error({ pool: p.target.key, err: String(err) }, "backlog sample handler failed");
      }
      // Asleep, rung since its bell was left, and nothing waits after all (a resume of an empty
      // queue): a new bell now; its counts unchanged, no reconcile would leave one.
      if (p.asleep && this.idle(p) && !this.doorbells.left(p.target.key)) this.sleep(p);
    }
  }

  private failed(p: PoolPoll, err: unknown, now: number): void {
    const prev = p.sample;
    p.sample = {
      at: now,
      queue: p.target.queue,
      error: redactError(err, p.target.password),
      failures: (prev?.failures ?? 0) + 1,
      lastGood: prev?.lastGood,
    };
  }
}
