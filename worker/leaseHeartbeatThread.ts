// The lease heartbeat runs on a thread of its own with its own Redis connection, so a handler
// that blocks the main event loop (CPU-bound work) cannot starve lease renewal. It renews all
// held leases in one call every interval, stops renewing a job past its hard deadline (a hung
// handler's lease then lapses and the sweeper redelivers it), and runs the leaderless sweeper.
import { parentPort, workerData } from "node:worker_threads";
import { connectRedis, Consumer, type Lease, type WorkerReport } from "../queue/index.ts";
import type { HeartbeatSettings, ToHeartbeat, FromHeartbeat } from "./leaseHeartbeat.ts";

const settings = workerData as HeartbeatSettings;
const port = parentPort!;
const post = (m: FromHeartbeat) => port.postMessage(m);

let lastError = "";
const redis = connectRedis(settings.redisUrl, {
  name: `conveyor-heartbeat:${settings.workerId}`,
  onError: (err) => {
    if (err.message !== lastError) post({ t: "error", message: `heartbeat Redis connection: ${err.message}` });
    lastError = err.message;
  },
});
const consumer = new Consumer(redis, settings.queue, { workerId: settings.workerId, leaseMs: settings.leaseMs });
const held = new Map<string, Lease & { renewUntil: number }>();
let status = { busy: 0, slots: settings.slots, draining: false };
let next = Date.now() + settings.intervalMs;
let renewing = false;
let stopped = false;

async function beat(): Promise<void> {
  if (renewing || stopped) return;
  renewing = true;
  const scheduled = next;
  next += settings.intervalMs;
  const started = Date.now();
  try {
    const leases = [...held.values()].filter((l) => l.renewUntil > started);
    const report: WorkerReport = { id: settings.workerId, pod: settings.pod, slots: status.slots, busy: status.busy, draining: status.draining, seen: started };
    const lost = await consumer.renew(leases, report);
    for (const id of lost) held.delete(id);
    post({ t: "renewed", count: leases.length, lagMs: Math.max(0, started - scheduled), durationMs: Date.now() - started });
    if (lost.length > 0) post({ t: "lost", ids: lost });
  } catch (err) {
    post({ t: "renewFailed", message: `lease renewal failed: ${(err as Error).message}` });
  } finally {
    renewing = false;
  }
}

let sweeping = false;
async function sweep(): Promise<void> {
  if (sweeping || stopped) return;
  sweeping = true;
  try {
    const r = await consumer.sweep({ maxStalls: settings.maxStalls, lockMs: settings.sweepIntervalMs, workerStaleMs: settings.leaseMs * 3 });
    if (r.ran && (r.requeued > 0 || r.deadLettered > 0)) post({ t: "swept", requeued: r.requeued, deadLettered: r.deadLettered });
  } catch (err) {
    post({ t: "error", message: `lease sweep failed: ${(err as Error).message}` });
  } finally {
    sweeping = false;
  }
}

// Every tick is reported, whether or not a renewal is still in flight: it proves this thread
// runs (liveness), which a Redis outage must not disprove.
const beatTimer = setInterval(() => {
  post({ t: "tick" });
  void beat();
}, settings.intervalMs);
const sweepTimer = setInterval(() => void sweep(), settings.sweepIntervalMs);
void beat();

port.on("message", (m: ToHeartbeat) => {
  switch (m.t) {
    case "hold":
      held.set(m.id, { id: m.id, token: m.token, renewUntil: m.renewUntil });
      break;
    case "drop":
      held.delete(m.id);
      break;
    case "status":
      status = { busy: m.busy, slots: m.slots, draining: m.draining };
      break;
    case "beat":
      void beat();
      break;
    case "stop":
      stopped = true;
      clearInterval(beatTimer);
      clearInterval(sweepTimer);
      void consumer
        .forgetWorker()
        .catch(() => {})
        .finally(() => {
          redis.disconnect();
          post({ t: "stopped" });
        });
      break;
  }
});
