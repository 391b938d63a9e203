// ─── Operator benchmark ─────────────────────────────────────────────────────────────────────
// Needs the operator (operator/main.ts) and the test control plane (test/support/controlplane.ts
// with its binaries: `make controlplane`). When either is missing this part is SKIPPED with a
// message, and the rest of `make bench` runs; both are loaded dynamically, so bench/ compiles
// without them.
//
// What it measures, with the operator as `conveyor operator` in a process of its own against a
// real kube-apiserver + etcd (no controller-manager, scheduler or kwok: nothing else talks to
// the API server, and idle pools at zero replicas are what an HPA controller would skip anyway):
//   - N idle WorkerPools (default 1,000; empty queues, scaled to zero): time until all are
//     reconciled; then over an idle window: operator CPU (% of one core), RSS, Kubernetes API
//     requests per minute by verb (its own counter), writes per minute seen by the API server's
//     audit log (lease renewals apart), and Redis commands per minute (backlog polls).
//   - Backlog to decision: time from enqueueing into an idle pool's queue until its
//     Deployment's spec.replicas changes — 0→1 activation (the operator's own decision, mode
//     hpa) and 1→N in mode direct (the operator runs the HPA algorithm). KEDA's default
//     pollingInterval is 30 s (15 s on average before it even looks).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parse as parseYaml } from "yaml";
import { RESOURCES, resourcePath } from "../operator/apis/coordinates.ts";
import type { WorkerPoolSpecInput } from "../operator/apis/v1alpha1/types.ts";
import { Producer, connectRedis } from "../queue/index.ts";
import { startProcess, stopProcess, type Started } from "../test/support/processes.ts";
import { freePort } from "../test/support/ports.ts";
import { parseMetrics, workerPoolManifest } from "../test/support/operator.ts";
import { client, delta, snapshot, startBenchRedis } from "./lib/redis.ts";
import { NODE, CONVEYOR_BIN } from "./lib/systems.ts";
import {
  REPO,
  loadAverage,
  nowMs,
  procSample,
  progress,
  round,
  sleep,
  summarize,
  type Summary,
} from "./lib/util.ts";

export interface OperatorResult {
  pools: number;
  /** Seconds from the first create until every pool reports observedGeneration = generation. */
  reconcileAllSeconds: number;
  /** Seconds after that until the operator made no API write for 15 s (the idle window starts then). */
  settleSeconds: number;
  idleWindowSeconds: number;
  cpuPercentOfCore: number;
  rssMiB: number;
  /** V8 heap in use and memory outside it (buffers, wasm), from the operator's own /metrics. */
  heapUsedMiB: number;
  /** V8 heap committed (nodejs_heap_size_total_bytes): used plus what V8 keeps for later. */
  heapTotalMiB: number;
  externalMiB: number;
  apiRequestsPerMinute: Record<string, number>;
  apiWritesPerMinute: number;
  leaseWritesPerMinute: number;
  /** Writes seen by the API server's audit log in the window (users other than system:*), lease renewals apart. */
  auditWritesPerMinute: number;
  /** The same writes by `verb resource[/subresource]`, to tell what an idle operator still writes. */
  auditWritesByResource: Record<string, number>;
  redisCommandsPerMinute: number;
  activationSeconds: Summary;
  directScaleUpSeconds: Summary;
  load: string;
}

export type OperatorBench = { skipped: string } | OperatorResult;

interface HttpResult {
  status: number;
  body: string;
}
interface AuditEventLike {
  verb: string;
  stageTimestamp?: string;
  user: { username: string };
  objectRef?: { resource?: string; subresource?: string };
}
/** The parts of test/support/controlplane.ts this benchmark uses. */
interface ControlPlaneLike {
  dir: string;
  kubeconfigPath: string;
  kubectl(...args: string[]): Promise<string>;
  waitForCrd(name: string, timeoutMs?: number): Promise<void>;
  request(method: string, path: string, body?: unknown): Promise<HttpResult>;
  auditEvents(filter?: (e: AuditEventLike) => boolean): Promise<AuditEventLike[]>;
  stop(): Promise<void>;
}
interface ControlPlaneModule {
  ControlPlane: { start(opts: Record<string, unknown>): Promise<ControlPlaneLike> };
  findAssets(): unknown;
}

const OPERATOR_MAIN = join(REPO, "operator/main.ts");
const CONTROLPLANE = join(REPO, "test/support/controlplane.ts");
const POOLS = resourcePath(RESOURCES.workerPools, { namespace: "default" });
const deploymentPath = (name: string) => `/apis/apps/v1/namespaces/default/deployments/${name}`;

/** Why the operator part cannot run here, or null. */
export async function operatorBenchUnavailable(): Promise<string | null> {
  if (!existsSync(OPERATOR_MAIN)) return "operator/main.ts is missing";
  if (!existsSync(CONTROLPLANE)) return "test/support/controlplane.ts is missing";
  try {
    const mod = (await import(pathToFileURL(CONTROLPLANE).href)) as ControlPlaneModule;
    mod.findAssets();
  } catch (err) {
    return `the test control plane is not installed (run \`make controlplane\`): ${(err as Error).message.split("\n")[0]}`;
  }
  return null;
}

async function scrape(port: number): Promise<Map<string, number>> {
  return parseMetrics(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
}

function apiRequests(m: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [series, v] of m) {
    if (!series.startsWith("conveyor_operator_kube_api_requests_total{")) continue;
    const verb = /verb="([^"]+)"/.exec(series)?.[1] ?? "?";
    const resource = /resource="([^"]+)"/.exec(series)?.[1] ?? "?";
    const key = resource === "leases" ? `${verb} leases` : verb;
    out.set(key, (out.get(key) ?? 0) + v);
  }
  return out;
}

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs: number,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

async function parallel<T>(items: T[], width: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/** The operator's NODE_OPTIONS and MALLOC_ARENA_MAX as the chart sets them (charts/conveyor/values.yaml). */
function chartOperatorEnv(): { NODE_OPTIONS: string; MALLOC_ARENA_MAX?: string } {
  const values = parseYaml(readFileSync(join(REPO, "charts/conveyor/values.yaml"), "utf8")) as {
    operator?: { nodeOptions?: string; mallocArenaMax?: number };
  };
  const arenas = values.operator?.mallocArenaMax;
  return {
    NODE_OPTIONS: values.operator?.nodeOptions ?? "",
    ...(arenas ? { MALLOC_ARENA_MAX: String(arenas) } : {}),
  };
}

export async function runOperatorBench(opts: {
  pools: number;
  idleSeconds: number;
  decisions: number;
  /** NODE_OPTIONS for the operator process; default: the chart's (operator.nodeOptions), as installed. */
  operatorNodeOptions?: string;
}): Promise<OperatorBench> {
  const unavailable = await operatorBenchUnavailable();
  if (unavailable) return { skipped: unavailable };
  const { ControlPlane } = (await import(pathToFileURL(CONTROLPLANE).href)) as ControlPlaneModule;

  progress("operator: starting the test control plane (kube-apiserver + etcd)");
  const cp = await ControlPlane.start({
    controllers: false,
    scheduler: false,
    kwok: false,
    aggregation: false,
    verbose: false,
  });
  const redis = await startBenchRedis();
  const driver = client(redis.url, "bench-operator-driver");
  const producerClient = connectRedis(redis.url, { name: "bench-operator-producer" });
  const producer = new Producer(producerClient);
  let op: Started | undefined;
  try {
    await cp.kubectl("apply", "--server-side", "-f", join(REPO, "crds", "conveyor.dev_workerpools.yaml"));
    await cp.waitForCrd("workerpools.conveyor.dev");

    const metricsPort = await freePort();
    const metricsApiPort = await freePort();
    op = startProcess(
      NODE,
      [
        CONVEYOR_BIN,
        "operator",
        `--kubeconfig=${cp.kubeconfigPath}`,
        "--identity=bench-operator",
        "--metrics-address=127.0.0.1",
        `--metrics-port=${metricsPort}`,
        "--metrics-api-address=127.0.0.1",
        `--metrics-api-port=${metricsApiPort}`,
        "--metrics-api-client-ca=none",
        "--leader-election-namespace=default",
        "--worker-image=conveyor-worker:bench",
        "--log-level=warn",
      ],
      {
        logFile: join(cp.dir, "operator-bench.log"),
        env: {
          ...process.env,
          POD_NAME: "",
          ...chartOperatorEnv(),
          ...(opts.operatorNodeOptions !== undefined ? { NODE_OPTIONS: opts.operatorNodeOptions } : {}),
        },
      },
    );
    await until(
      "operator /readyz",
      async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).ok,
      240_000,
      250,
    );
    await until(
      "operator leads",
      async () => (await scrape(metricsPort)).get("conveyor_operator_leader") === 1,
      240_000,
      250,
    );

    const pool = (name: string, scaling: WorkerPoolSpecInput["scaling"] = {}) =>
      workerPoolManifest(name, redis.url, { scaling });
    const names = Array.from({ length: opts.pools }, (_, i) => `bench-pool-${i}`);
    const direct = Array.from({ length: opts.decisions }, (_, i) => `bench-direct-${i}`);
    progress(`operator: creating ${opts.pools} idle WorkerPools (+${direct.length} in mode direct)`);
    const t0 = nowMs();
    const create = async (obj: unknown) => {
      const res = await cp.request("POST", POOLS, obj);
      if (res.status !== 201 && res.status !== 409)
        throw new Error(`create WorkerPool: HTTP ${res.status}: ${res.body.slice(0, 300)}`);
    };
    await parallel(names, 16, (n) => create(pool(n)));
    await parallel(direct, 4, (n) =>
      create(pool(n, { mode: "direct", minReplicas: 1, maxReplicas: 10, targetBacklogPerReplica: 10 })),
    );
    const total = names.length + direct.length;
    // This box reconciled 7–18 pools/s at load ~15: 10,000 pools need more than the 10 min that
    // suffice for 1,000.
    const waitMs = Math.max(600_000, total * 250);
    await until(
      `all ${total} pools reconciled`,
      async () => {
        const res = await cp.request("GET", POOLS);
        const list = JSON.parse(res.body) as {
          items: { metadata: { generation?: number }; status?: { observedGeneration?: number } }[];
        };
        const done = list.items.filter((p) => p.status?.observedGeneration === p.metadata.generation).length;
        return done >= total;
      },
      waitMs,
      2000,
    );
    const reconcileAllSeconds = (nowMs() - t0) / 1000;
    progress(
      `operator: ${total} pools reconciled in ${reconcileAllSeconds.toFixed(1)} s; settling (no API writes for 15 s), then an idle window of ${opts.idleSeconds} s`,
    );
    // Each pool's status is written again once its first backlog poll is in; on a loaded API
    // server that second wave can outlast a fixed pause, so wait until the writes stop.
    const writesSoFar = async () =>
      [...apiRequests(await scrape(metricsPort))]
        .filter(([k]) => /^(create|update|patch|delete)/.test(k) && !k.endsWith("leases"))
        .reduce((a, [, v]) => a + v, 0);
    let quietSince = nowMs();
    let lastWrites = await writesSoFar();
    await until(
      "the operator's writes to stop",
      async () => {
        const w = await writesSoFar();
        if (w !== lastWrites) [lastWrites, quietSince] = [w, nowMs()];
        return nowMs() - quietSince >= 15_000;
      },
      waitMs,
      1000,
    );
    const settleSeconds = (nowMs() - t0) / 1000 - reconcileAllSeconds;

    const pid = op.child.pid!;
    const m0 = apiRequests(await scrape(metricsPort));
    const c0 = procSample(pid);
    const r0 = await snapshot(driver);
    const w0 = nowMs();
    await sleep(opts.idleSeconds * 1000);
    const scraped = await scrape(metricsPort);
    const m1 = apiRequests(scraped);
    const mib = (name: string) => round((scraped.get(`conveyor_operator_${name}`) ?? 0) / 2 ** 20, 1);
    const c1 = procSample(pid);
    const r1 = await snapshot(driver);
    const w1 = nowMs();
    const minutes = (w1 - w0) / 60_000;
    const apiRequestsPerMinute: Record<string, number> = {};
    for (const [k, v] of m1) {
      const d = v - (m0.get(k) ?? 0);
      if (d > 0) apiRequestsPerMinute[k] = round(d / minutes, 1);
    }
    const writes = (k: string) => /^(create|update|patch|delete)/.test(k);
    const apiWritesPerMinute = round(
      Object.entries(apiRequestsPerMinute)
        .filter(([k]) => writes(k) && !k.endsWith("leases"))
        .reduce((a, [, v]) => a + v, 0),
      1,
    );
    const leaseWritesPerMinute = round(
      Object.entries(apiRequestsPerMinute)
        .filter(([k]) => writes(k) && k.endsWith("leases"))
        .reduce((a, [, v]) => a + v, 0),
      1,
    );
    const audit = await cp.auditEvents((e) => {
      const at = Date.parse(e.stageTimestamp ?? "");
      return (
        at >= w0 &&
        at <= w1 &&
        !e.user.username.startsWith("system:") &&
        ["create", "update", "patch", "delete"].includes(e.verb) &&
        e.objectRef?.resource !== "leases"
      );
    });
    const auditWritesByResource: Record<string, number> = {};
    for (const e of audit) {
      const what = `${e.verb} ${e.objectRef?.resource ?? "?"}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ""}`;
      auditWritesByResource[what] = (auditWritesByResource[what] ?? 0) + 1;
    }
    const redisDelta = delta(r0, r1, { info: 4 });
    const redisCommands = [...redisDelta.commands.values()].reduce((a, s) => a + s.calls, 0);

    progress("operator: backlog-to-decision times");
    const activation: number[] = [];
    for (const name of names.slice(0, opts.decisions)) {
      const before =
        (JSON.parse((await cp.request("GET", deploymentPath(name))).body) as { spec?: { replicas?: number } })
          .spec?.replicas ?? 0;
      if (before !== 0) throw new Error(`${name} is not at zero replicas (${before})`);
      const t = nowMs();
      await producer.enqueue(`${name}/work`, { bench: true });
      await until(
        `${name} scaled from zero`,
        async () => {
          const d = JSON.parse((await cp.request("GET", deploymentPath(name))).body) as {
            spec?: { replicas?: number };
          };
          return (d.spec?.replicas ?? 0) >= 1;
        },
        120_000,
        100,
      );
      activation.push((nowMs() - t) / 1000);
    }
    const scaleUp: number[] = [];
    for (const name of direct) {
      await until(
        `${name} at one replica`,
        async () => {
          const d = JSON.parse((await cp.request("GET", deploymentPath(name))).body) as {
            spec?: { replicas?: number };
          };
          return d.spec?.replicas === 1;
        },
        120_000,
        200,
      );
      const t = nowMs();
      await producer.enqueueMany(
        `${name}/work`,
        Array.from({ length: 50 }, (_, i) => ({ data: { i } })),
      );
      await until(
        `${name} scaled up`,
        async () => {
          const d = JSON.parse((await cp.request("GET", deploymentPath(name))).body) as {
            spec?: { replicas?: number };
          };
          return (d.spec?.replicas ?? 0) > 1;
        },
        120_000,
        100,
      );
      scaleUp.push((nowMs() - t) / 1000);
    }

    return {
      pools: opts.pools,
      reconcileAllSeconds: round(reconcileAllSeconds, 1),
      settleSeconds: round(settleSeconds, 1),
      idleWindowSeconds: round((w1 - w0) / 1000, 1),
      cpuPercentOfCore: round(((c1.cpuMs - c0.cpuMs) / (w1 - w0)) * 100, 2),
      rssMiB: round(c1.rssKb / 1024, 1),
      heapUsedMiB: mib("nodejs_heap_size_used_bytes"),
      heapTotalMiB: mib("nodejs_heap_size_total_bytes"),
      externalMiB: mib("nodejs_external_memory_bytes"),
      apiRequestsPerMinute,
      apiWritesPerMinute,
      leaseWritesPerMinute,
      auditWritesPerMinute: round(audit.length / minutes, 1),
      auditWritesByResource,
      redisCommandsPerMinute: round(redisCommands / minutes),
      activationSeconds: roundSummary(summarize(activation)),
      directScaleUpSeconds: roundSummary(summarize(scaleUp)),
      load: loadAverage(),
    };
  } finally {
    if (op) await stopProcess(op, 15_000);
    producerClient.disconnect();
    driver.disconnect();
    await redis.stop();
    await cp.stop();
  }
}

function roundSummary(s: Summary): Summary {
  return {
    ...s,
    median: round(s.median, 2),
    min: round(s.min, 2),
    max: round(s.max, 2),
    values: s.values.map((v) => round(v, 2)),
  };
}

if (import.meta.main) {
  // `node bench/operator.ts [pools] [idleSeconds]` or `--pools N --idle S`.
  const args = process.argv.slice(2);
  const flag = (name: string) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args.splice(i, 2)[1] : undefined;
  };
  const pools = Number(flag("pools") ?? args[0] ?? 1000);
  const operatorNodeOptions = flag("operator-node-options");
  const idleSeconds = Number(flag("idle") ?? args[1] ?? 60);
  if (!Number.isInteger(pools) || pools < 1 || !(idleSeconds > 0)) {
    process.stderr.write(
      "usage: node bench/operator.ts [--pools N] [--idle SECONDS] [--operator-node-options FLAGS]\n",
    );
    process.exit(2);
  }
  runOperatorBench({ pools, idleSeconds, decisions: 3, operatorNodeOptions }).then(
    (r) => {
      process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
      process.exit(0);
    },
    (err: Error) => {
      process.stderr.write(`operator bench failed: ${err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}
