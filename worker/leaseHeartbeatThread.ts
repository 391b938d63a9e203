// The lease heartbeat runs on a thread of its own with its own Redis connection, so a handler
// that blocks the main event loop (CPU-bound work) cannot starve lease renewal. It renews all
// held leases in one call every interval, stops renewing a job past its hard deadline (a hung
// handler's lease then lapses and the sweeper redelivers it), and runs the leaderless sweeper
// after each renewal (renew first, then sweep: after an outage this worker's own leases are
// fresh before it judges anyone's), then reclaims the queue's finished jobs whose retention has
// passed, a batch per call (reclaim_finished.lua), so no single call holds Redis for long.
//
// After a Redis outage the connection's "ready" renews at once instead of at the next tick (a
// renewal queued during the outage runs on reconnect with the deadline it computed back then,
// which may already be past: renew again right after it). The sweeper's outage grace
// (sweep_leases.lua) keeps leases from expiring until every live worker had that chance; it
// is opened by a gap between sweep calls, which this thread makes every tick.
//
// The leases to renew and the busy/idle report come from the shared lease table (leaseTable.ts),
// read at the start of each renewal; hold/drop messages only for a lease the table could not take.
import { parentPort, workerData } from "node:worker_threads";
import { connectRedis, Consumer, readerFields, type Lease, type WorkerReport } from "../queue/index.ts";
import type { HeartbeatSettings, ToHeartbeat, FromHeartbeat } from "./leaseHeartbeat.ts";
import { LeaseTable } from "./leaseTable.ts";

const settings = workerData as HeartbeatSettings;
const port = parentPort!;
const post = (m: FromHeartbeat) => port.postMessage(m);

let lastError = "";
const redis = connectRedis(settings.redisUrl, {
  name: `conveyor-heartbeat:${settings.workerId}`,
  onError: (err) => {
    if (err.message !== lastError)
      post({ t: "error", message: `heartbeat Redis connection: ${err.message}` });
    lastError = err.message;
  },
});
redis.on("ready", () => void beat(true));
const consumer = new Consumer(redis, settings.queue, {
  workerId: settings.workerId,
  leaseMs: settings.leaseMs,
});
/**
 * connectRedis reconnects at most 3 s apart: after an outage another worker may reconnect (and
 * renew) up to that much later than the first sweeper, so the grace is a lease plus that.
 */
const RECONNECT_MAX_DELAY_MS = 3000;
/**
 * Sweep calls come every tick (a third of the lease) from each worker; a gap of half a lease
 * is not normal. An outage must outlast two thirds of a lease to let a live worker's lease
 * lapse (its last renewal is at most a third old when the outage starts), so it always opens
 * the grace.
 */
const sweepGapMs = Math.max(Math.round(settings.intervalMs * 1.5), Math.round(settings.leaseMs / 2));
const sweepGraceMs = settings.leaseMs + RECONNECT_MAX_DELAY_MS;
const table = new LeaseTable(settings.tableSlots, settings.table);
/** Leases held by message (the table could not take them). */
const held = new Map<string, Lease & { renewUntil: number }>();
/**
 * Table entries (id and token) found lost: not renewed again while the main thread still holds
 * them (it drops them when the loss aborts the job). Only that execution: the same id under a new
 * token is renewed.
 */
let lostInTable = new Set<string>();
const leaseKey = (l: Lease) => `${l.token}\n${l.id}`;

/** Every held lease: the table's (those not found lost) and those held by message, one per job id. */
function heldLeases(): (Lease & { renewUntil: number; inTable: boolean })[] {
  const fromTable = table.read();
  const stillLost = new Set<string>();
  const leases: (Lease & { renewUntil: number; inTable: boolean })[] = [];
  const ids = new Set<string>();
  for (const l of fromTable) {
    const key = leaseKey(l);
    if (lostInTable.has(key)) {
      stillLost.add(key);
      continue;
    }
    ids.add(l.id);
    leases.push({ ...l, inTable: true });
  }
  lostInTable = stillLost;
  for (const l of held.values()) if (!ids.has(l.id)) leases.push({ ...l, inTable: false });
  return leases;
}
let next = Date.now() + settings.intervalMs;
const reader = readerFields();
/** Until when the operator cordoned this pod (ms; 0: not), as the last renewal read it. */
let cordonedUntil = 0;
let renewing = false;
let renewAgain = false;
let stopped = false;

/** `urgent`: the connection is back; if a renewal is in flight (queued during the outage), renew again after it. */
async function beat(urgent = false): Promise<void> {
  if (stopped) return;
  if (renewing) {
    if (urgent) renewAgain = true;
    return;
  }
  // Sent while disconnected, a renewal would wait in ioredis's offline queue (and fail minutes
  // later); the connection's "ready" renews at once instead.
  if (redis.status !== "ready") return;
  renewing = true;
  let ok = false;
  const scheduled = next;
  next += settings.intervalMs;
  const started = Date.now();
  let leases: (Lease & { renewUntil: number; inTable: boolean })[] = [];
  try {
    leases = heldLeases().filter((l) => l.renewUntil > started);
    const status = table.readStatus();
    const report: WorkerReport = {
      id: settings.workerId,
      pod: settings.pod,
      slots: status.slots,
      busy: status.busy,
      draining: status.draining,
      ...(status.jobP50Ms > 0 ? { jobP50Ms: status.jobP50Ms } : {}),
      ...(cordonedUntil > started ? { cordoned: true } : {}),
      ...reader,
      seen: started,
    };
    const renewal = await consumer.renew(leases, report);
    const until = renewal.cordonedUntil ?? 0;
    if (until !== cordonedUntil) {
      cordonedUntil = until;
      post({ t: "cordon", until });
    }
    const lostIds = new Set(renewal.lost);
    const cancelledIds = new Set(renewal.cancelled);
    // A loss is of one execution (id and token): while this renewal was in flight the job may have
    // failed and been claimed again by this worker under a new token, which is not lost.
    const lostLeases = leases.filter((l) => lostIds.has(l.id));
    const lost = lostLeases.map((l) => ({ id: l.id, token: l.token, cancelled: cancelledIds.has(l.id) }));
    for (const l of lostLeases) {
      if (l.inTable) lostInTable.add(leaseKey(l));
      else if (held.get(l.id)?.token === l.token) held.delete(l.id);
    }
    post({
      t: "renewed",
      count: leases.length,
      lagMs: Math.max(0, started - scheduled),
      durationMs: Date.now() - started,
    });
    if (lost.length > 0) post({ t: "lost", leases: lost });
    ok = true;
  } catch (err) {
    const what = leases.length > 0 ? `lease renewal (${leases.length} leases)` : "worker report";
    post({ t: "renewFailed", message: `${what} failed: ${(err as Error).message}` });
  } finally {
    renewing = false;
  }
  if (renewAgain) {
    renewAgain = false;
    void beat();
  } else if (ok) void sweep();
}

let sweeping = false;
async function sweep(): Promise<void> {
  if (sweeping || stopped) return;
  sweeping = true;
  try {
    const r = await consumer.sweep({
      maxStalls: settings.maxStalls,
      lockMs: settings.sweepIntervalMs,
      workerStaleMs: settings.leaseMs * 3,
      gapMs: sweepGapMs,
      graceMs: sweepGraceMs,
    });
    if (r.ran && (r.requeued > 0 || r.deadLettered > 0))
      post({ t: "swept", requeued: r.requeued, deadLettered: r.deadLettered });
  } catch (err) {
    post({ t: "error", message: `lease sweep failed: ${(err as Error).message}` });
  }
  try {
    await reclaim();
  } finally {
    sweeping = false;
  }
}

/**
 * Reclaim finished jobs, batch after batch while more are due, for at most half a tick: what is
 * left waits for the next tick (or another worker of the queue, which reclaims alongside).
 */
async function reclaim(): Promise<void> {
  const until = Date.now() + settings.intervalMs / 2;
  let count = 0;
  try {
    for (;;) {
      const r = await consumer.reclaimFinished();
      count += r.reclaimed;
      if (!r.more || stopped || Date.now() >= until) break;
    }
  } catch (err) {
    // (a call cut off by the stop's disconnect is no error)
    if (!stopped) post({ t: "error", message: `reclaiming finished jobs failed: ${(err as Error).message}` });
  }
  if (count > 0) post({ t: "reclaimed", count });
}

// Every tick is reported, whether or not a renewal is still in flight: it proves this thread
// runs (liveness), which a Redis outage must not disprove.
const beatTimer = setInterval(() => {
  post({ t: "tick" });
  void beat();
}, settings.intervalMs);
void beat();

port.on("message", (batch: ToHeartbeat[]) => {
  for (const m of batch) handle(m);
});

function handle(m: ToHeartbeat): void {
  switch (m.t) {
    case "hold":
      held.set(m.id, { id: m.id, token: m.token, renewUntil: m.renewUntil });
      break;
    case "drop":
      held.delete(m.id);
      break;
    case "beat":
      void beat();
      break;
    case "stop":
      stopped = true;
      clearInterval(beatTimer);
      // Forgetting this worker's report needs Redis; without it the report just ages out.
      void new Promise<unknown>((resolve) => {
        if (redis.status !== "ready") return resolve(undefined);
        redis.once("close", resolve);
        consumer.forgetWorker().then(resolve, resolve);
      }).finally(() => {
        redis.disconnect();
        post({ t: "stopped" });
      });
      break;
  }
}
