// The main-thread side of the lease heartbeat (see leaseHeartbeatThread.ts for why it is a thread).
import { extname } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { LeaseTable, leaseTableSlots, NO_SLOT } from "./leaseTable.ts";

export interface HeartbeatSettings {
  redisUrl: string;
  queue: string;
  workerId: string;
  pod: string;
  slots: number;
  leaseMs: number;
  intervalMs: number;
  sweepIntervalMs: number;
  maxStalls: number;
  /** The lease table (leaseTable.ts) the thread reads at each beat, and its size. */
  table: SharedArrayBuffer;
  tableSlots: number;
}

/** Leases and status go through the shared lease table; hold/drop messages only for a lease it cannot take. */
export type ToHeartbeat =
  | { t: "hold"; id: string; token: string; renewUntil: number }
  | { t: "drop"; id: string }
  | { t: "beat" }
  | { t: "stop" };

export type FromHeartbeat =
  | { t: "renewed"; count: number; lagMs: number; durationMs: number }
  | { t: "lost"; leases: LostLease[] }
  | { t: "swept"; requeued: number; deadLettered: number }
  | { t: "reclaimed"; count: number }
  | { t: "cordon"; until: number }
  | { t: "tick" }
  | { t: "renewFailed"; message: string }
  | { t: "error"; message: string }
  | { t: "stopped" };

/** An execution (job id and fencing token) whose lease is gone: taken over, or the job was cancelled. */
export interface LostLease {
  id: string;
  token: string;
  cancelled: boolean;
}

export interface HeartbeatEvents {
  onRenewed(count: number, lagMs: number, durationMs: number): void;
  /** Executions whose lease another worker or the sweeper took, or whose job was cancelled. */
  onLost(leases: LostLease[]): void;
  onSwept(requeued: number, deadLettered: number): void;
  /** Finished jobs' records reclaimed after their retention. */
  onReclaimed(count: number): void;
  /** The operator cordoned this worker's pod until then (ms; 0: not cordoned): claim nothing new. */
  onCordon(until: number): void;
  onError(message: string): void;
}

/** Where hold() put a lease: a slot of the shared table, or HELD_BY_MESSAGE. */
export type HeldLease = number;
export const HELD_BY_MESSAGE = NO_SLOT;

export class LeaseHeartbeat {
  private readonly thread: Worker;
  private readonly stopped: Promise<void>;
  /**
   * When the heartbeat thread last ticked. Liveness follows this, not renewal success: a Redis
   * outage must not make the kubelet restart every worker (which would only turn running jobs
   * into re-runs).
   */
  lastBeatAt = Date.now();

  private readonly table: LeaseTable;
  /** The thread has written the worker's report at least once (its first renewal reached Redis). */
  reporting = false;

  constructor(settings: Omit<HeartbeatSettings, "table" | "tableSlots">, events: HeartbeatEvents) {
    const file = new URL(`./leaseHeartbeatThread${extname(fileURLToPath(import.meta.url))}`, import.meta.url);
    this.table = new LeaseTable(leaseTableSlots(settings.slots));
    this.table.setStatus(0, settings.slots, false);
    const workerData: HeartbeatSettings = {
      ...settings,
      table: this.table.buffer,
      tableSlots: this.table.slots,
    };
    this.thread = new Worker(file, { workerData, name: "lease-heartbeat" });
    this.stopped = new Promise((resolve) => {
      this.thread.on("message", (m: FromHeartbeat) => {
        switch (m.t) {
          case "tick":
            this.lastBeatAt = Date.now();
            break;
          case "renewed":
            this.reporting = true;
            events.onRenewed(m.count, m.lagMs, m.durationMs);
            break;
          case "renewFailed":
            events.onError(m.message);
            break;
          case "lost":
            events.onLost(m.leases);
            break;
          case "swept":
            events.onSwept(m.requeued, m.deadLettered);
            break;
          case "cordon":
            events.onCordon(m.until);
            break;
          case "reclaimed":
            events.onReclaimed(m.count);
            break;
          case "error":
            events.onError(m.message);
            break;
          case "stopped":
            resolve();
            break;
        }
      });
      this.thread.on("error", (err) => events.onError(`heartbeat thread crashed: ${err.message}`));
      this.thread.on("exit", () => resolve());
    });
  }

  /**
   * Written to the shared table at once: the thread sees it at its next beat even if the event
   * loop then blocks. A lease the table cannot take (full, or an id too long) goes by message.
   * Returns where it is held, for drop().
   */
  hold(id: string, token: string, renewUntil: number): HeldLease {
    const slot = this.table.hold(id, token, renewUntil);
    if (slot !== NO_SLOT) return slot;
    this.send({ t: "hold", id, token, renewUntil });
    return HELD_BY_MESSAGE;
  }
  /** Once per hold(): a table slot may hold another job's lease after. */
  drop(id: string, held: HeldLease): void {
    if (held === HELD_BY_MESSAGE) this.send({ t: "drop", id });
    else this.table.drop(held);
  }
  status(busy: number, slots: number, draining: boolean): void {
    this.table.setStatus(busy, slots, draining);
  }
  /** Reported from the next beat on (see jobDurations.ts). */
  jobP50(ms: number): void {
    this.table.setJobP50(ms);
  }
  /** Renew now (e.g. right after a claim, so the first report is prompt). */
  beat(): void {
    this.send({ t: "beat" });
  }

  async stop(): Promise<void> {
    this.send({ t: "stop" });
    this.flush();
    await this.stopped;
    await this.thread.terminate();
  }

  /** Messages of one tick go to the thread as one batch (each postMessage is a structured clone and a wake-up). */
  private pending: ToHeartbeat[] = [];
  private send(m: ToHeartbeat): void {
    if (this.pending.length === 0) queueMicrotask(() => this.flush());
    this.pending.push(m);
  }
  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    if (batch.length > 0) this.thread.postMessage(batch);
  }
}
