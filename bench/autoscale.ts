// ─── Autoscaling side by side: KEDA vs Conveyor's operator ────────────────────────────────────
// The same worker pool (a WorkerPool's Deployment of `conveyor worker` processes running the
// recording handler, 10 jobs at a time per pod, a 30 s drain) scaled by:
//   keda-default       KEDA v2.21.0 with the metrics-api scaler on the job API's live counts of
//                      the queue (GET /queues/{queue}, valueLocation "backlog": ready + due
//                      delayed + in flight — the number Conveyor's operator scales on), KEDA's
//                      defaults (pollingInterval 30 s, cooldownPeriod 300 s); its HPA targets the
//                      WorkerPool's scale subresource, so the operator's own autoscaling is off;
//   keda-tuned         the same with pollingInterval 5 s (Conveyor's pollSeconds default);
//   conveyor-backlog   Conveyor's operator, mode direct, its defaults (pollSeconds 5);
//   conveyor-latency   the same with scaling.targetWaitSeconds (the latency mode) when this
//                      checkout's WorkerPool CRD has the field; otherwise reported "not available".
// Every arm targets 10 jobs per replica (= a pod's concurrency) and at most --max-replicas.
//
// One control plane (API server, controller manager with the HPA controller at Kubernetes'
// default 15 s sync period, scheduler) for the whole run, and one node for every arm's pods:
//   --node simulated   (default) kwok binds the pods and test/support/podRunner.ts runs a real
//                      worker process for each (drained on delete like a kubelet would);
//   --node real        a real kubelet + containerd (test/support/node.ts): each pod a container of
//                      the worker image (`make images`), the handler directory and the execution
//                      log hostPath volumes, Redis reached at the node's bridge address. Needs
//                      root (a clear error otherwise); the host is checked unchanged afterwards.
// KEDA owns external.metrics.k8s.io while it runs, so Conveyor's pools run in `direct` mode
// beside it. The arms run one after another, never at once: on a 2-core machine they would share
// the CPU they are measured on.
//
//   node bench/autoscale.ts [--profile full|short|smoke] [--workloads burst,ramp,spikes,long,paused]
//        [--arms keda-default,keda-tuned,conveyor-backlog,conveyor-latency] [--max-replicas 8]
//        [--target-wait 10] [--conveyor-target-per-replica 10] [--scale-down-window S] [--seed 33]
//        [--node simulated|real] [--out bench/results] [--name NAME]
// --conveyor-target-per-replica sets Conveyor's targetBacklogPerReplica alone (KEDA keeps 10): to
// compare at equal pod-seconds rather than at equal target.
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pollUntil } from "../test/support/poll.ts";
import { freePort } from "../test/support/ports.ts";
import { connectRedis, pauseQueue, Producer, QueueAdmin, resumeQueue } from "../queue/index.ts";
import { hostPathMounts } from "../test/e2e/scenario.ts";
import { buildImages, WORKER_IMAGE } from "../test/support/containers.ts";
import { ControlPlane } from "../test/support/controlplane.ts";
import { ensureKeda, KEDA_NAMESPACE, startKeda, type KedaProcesses } from "../test/support/keda.ts";
import { startOperator, type OperatorProcess } from "../test/support/operator.ts";
import { hostState, nodeFootprint, nodeUnavailable, RealNode, type HostState } from "../test/support/node.ts";
import { PodRunner } from "../test/support/podRunner.ts";
import { startProcess, stopProcess, type Started } from "../test/support/processes.ts";
import { RedisServer } from "../test/support/redis.ts";
import { CONVEYOR, NODE, RECORDING_HANDLER } from "../test/support/workers.ts";
import {
  arrivalBatches,
  buildWorkload,
  PROFILES,
  WORKLOADS,
  type ProfileName,
  type Workload,
  type WorkloadName,
} from "./autoscale/traces.ts";
import {
  idealWaits,
  renderReplicasSvg,
  renderTable,
  renderVersus,
  type FloorWaits,
  summarizeRun,
  type RunSummary,
  type Sample,
} from "./autoscale/report.ts";
import { intFlag, loadAverage, machineInfo, parseFlags, progress, REPO, runMain, sleep } from "./lib/util.ts";

export const ARMS = ["keda-default", "keda-tuned", "conveyor-backlog", "conveyor-latency"] as const;
export type ArmName = (typeof ARMS)[number];
/** Where the pools' pods run: kwok + a worker process per pod, or a real kubelet + containerd. */
export const NODES = ["simulated", "real"] as const;
export type NodeKind = (typeof NODES)[number];

const NS = "default";
const CONCURRENCY = 10;
const CRD_FILE = join(REPO, "crds", "conveyor.dev_workerpools.yaml");

export interface AutoscaleOptions {
  profile: ProfileName;
  workloads: WorkloadName[];
  arms: ArmName[];
  maxReplicas: number;
  /** The latency mode's scaling.targetWaitSeconds. */
  targetWaitSeconds: number;
  /** Conveyor's targetBacklogPerReplica when not the concurrency (KEDA's target stays 10). */
  conveyorTargetPerReplica?: number;
  /** HPA scale-down stabilization for every arm (unset: the HPA default, 300 s). */
  scaleDownWindowS?: number;
  seed: number;
  /** Which node runs every arm's pods (reports written before --node existed: simulated). */
  node: NodeKind;
}

/** The report's `node`: which node ran the pods, in a sentence. */
export function nodeDescription(node: NodeKind): string {
  return node === "real"
    ? `real: a kubelet + containerd (test/support/node.ts), each pod a container of the worker image ${WORKER_IMAGE}`
    : "simulated: kwok nodes, a real `conveyor worker` process per pod (test/support/podRunner.ts)";
}

const nodeOf = (r: AutoscaleReport): NodeKind => r.options.node ?? "simulated";

export interface AutoscaleReport {
  date: string;
  profile: ProfileName;
  node: string;
  options: AutoscaleOptions;
  keda: string;
  /** Arms that could not run here, with the reason. */
  unavailable: Record<string, string>;
  workloads: { name: WorkloadName; description: string; windowS: number; jobs: number; runs: RunSummary[] }[];
  machine: ReturnType<typeof machineInfo>;
  load: { before: string; after: string };
  seconds: number;
  /** When arms ran in separate invocations merged with --append: each one's arms, start, load and length. */
  parts?: { arms: string[]; date: string; load: { before: string; after: string }; seconds: number }[];
}

function partOf(r: AutoscaleReport): NonNullable<AutoscaleReport["parts"]>[number] {
  const arms = [...new Set(r.workloads.flatMap((w) => w.runs.map((x) => x.arm)))];
  return { arms, date: r.date, load: r.load, seconds: r.seconds };
}

/** `add`'s runs merged into `base` (same profile and seed): an arm run again replaces its old run. */
export function mergeReports(base: AutoscaleReport, add: AutoscaleReport): AutoscaleReport {
  if (base.profile !== add.profile || base.options.seed !== add.options.seed)
    throw new Error(
      `--append: the existing report is profile ${base.profile} seed ${base.options.seed}, this run ${add.profile} seed ${add.options.seed}`,
    );
  if (nodeOf(base) !== nodeOf(add))
    throw new Error(
      `--append: the existing report ran on the ${nodeOf(base)} node, this run --node ${nodeOf(add)}`,
    );
  const order = (arm: string) => ARMS.indexOf(arm as ArmName);
  const workloads = base.workloads.map((w) => ({ ...w, runs: [...w.runs] }));
  for (const w of add.workloads) {
    const into = workloads.find((x) => x.name === w.name);
    if (!into) workloads.push(w);
    else
      into.runs = [...into.runs.filter((r) => !w.runs.some((n) => n.arm === r.arm)), ...w.runs].sort(
        (a, b) => order(a.arm) - order(b.arm),
      );
  }
  const unavailable = { ...base.unavailable, ...add.unavailable };
  for (const w of workloads) for (const r of w.runs) delete unavailable[r.arm];
  return {
    ...base,
    options: { ...base.options, arms: [...new Set([...base.options.arms, ...add.options.arms])] },
    keda: base.keda === "not run" ? add.keda : base.keda,
    unavailable,
    workloads: WORKLOADS.flatMap((n) => workloads.filter((w) => w.name === n)),
    load: { before: base.load.before, after: add.load.after },
    seconds: base.seconds + add.seconds,
    parts: [...(base.parts ?? [partOf(base)]), partOf(add)],
  };
}

/** Why the latency mode cannot run in this checkout, or null. */
export function latencyModeUnavailable(): string | null {
  return readFileSync(CRD_FILE, "utf8").includes("targetWaitSeconds")
    ? null
    : "not available: this checkout's WorkerPool CRD has no scaling.targetWaitSeconds (the latency mode of issue 33 has not landed here)";
}

interface Harness {
  cp: ControlPlane;
  redis: RedisServer;
  keda?: KedaProcesses;
  operator: OperatorProcess;
  api: Started;
  apiPort: number;
  workers: WorkerNode;
  dir: string;
}

/** Where the pools' pods run, and what a WorkerPool needs to run there. */
interface WorkerNode {
  /** Redis as the pods reach it. */
  redisUrl: string;
  /** spec.handler.module as the pods see it: the recording handler. */
  handlerModule: string;
  /** Merged into the pool's spec.template (the image, volumes, EXEC_LOG). */
  template: { env: { name: string; value: string }[] } & Record<string, unknown>;
  /** The ndjson file the handler appends each start to, as this process reads it. */
  execLog: string;
  /** The pool's pods the node pays for (alive or draining). */
  podsAlive(pool: string, deployment: string): Promise<number>;
  stop(): Promise<void>;
  /** The real node (for the host check), when it is one. */
  real?: RealNode;
}

/** kwok binds the pods; a `conveyor worker` process runs for each, with the pod's environment. */
function simulatedWorkers(cp: ControlPlane, redis: RedisServer, dir: string): WorkerNode {
  const execLog = join(dir, "executions.ndjson");
  const runner = new PodRunner(cp.kubeConfig(), {
    namespace: NS,
    labelSelector: "conveyor.dev/workerpool",
    dir,
    extraEnv: { EXEC_LOG: execLog },
    pollMs: 250,
  });
  runner.start();
  return {
    redisUrl: redis.url,
    handlerModule: RECORDING_HANDLER.slice("module:".length),
    template: { env: [] },
    execLog,
    podsAlive: async (_pool, deployment) =>
      runner.alive.filter((p) => p.name.startsWith(`${deployment}-`)).length,
    stop: () => runner.stop(),
  };
}

/**
 * The worker image's pods under a real kubelet: the handler directory (test/fixtures) and a
 * directory for the execution log as hostPath volumes (that one 0777: the container runs as
 * uid 65532 with a read-only root), Redis at the node's bridge address.
 */
function realWorkers(cp: ControlPlane, node: RealNode, redis: RedisServer, dir: string): WorkerNode {
  const execDir = join(dir, "out");
  return {
    redisUrl: `redis://${node.address}:${redis.port}`,
    handlerModule: "/handlers/recordingHandler.js",
    template: {
      image: WORKER_IMAGE,
      imagePullPolicy: "Never",
      env: [{ name: "EXEC_LOG", value: "/out/executions.ndjson" }],
      ...hostPathMounts(execDir),
    },
    execLog: join(execDir, "executions.ndjson"),
    // pods in the API not yet terminal: created, running or terminating (what the node pays for)
    podsAlive: async (pool) => {
      const list = await kubeGet<{ items: { status?: { phase?: string } }[] }>(
        cp,
        `/api/v1/namespaces/${NS}/pods?labelSelector=${encodeURIComponent(`conveyor.dev/workerpool=${pool}`)}`,
      );
      return (list?.items ?? []).filter((p) => !["Succeeded", "Failed"].includes(p.status?.phase ?? ""))
        .length;
    },
    stop: () => node.stop(),
    real: node,
  };
}

async function kubeGet<T>(cp: ControlPlane, path: string): Promise<T | undefined> {
  const res = await cp.request("GET", path);
  if (res.status === 404) return undefined;
  if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status} ${res.body.slice(0, 300)}`);
  return JSON.parse(res.body) as T;
}

interface DeploymentLike {
  metadata: { name: string };
  spec?: { replicas?: number };
}

async function poolDeployment(cp: ControlPlane, pool: string): Promise<DeploymentLike | undefined> {
  const list = await kubeGet<{ items: DeploymentLike[] }>(
    cp,
    `/apis/apps/v1/namespaces/${NS}/deployments?labelSelector=${encodeURIComponent(`conveyor.dev/workerpool=${pool}`)}`,
  );
  return list?.items[0];
}

function workerPool(name: string, arm: ArmName, workers: WorkerNode, o: AutoscaleOptions): object {
  const behavior =
    o.scaleDownWindowS !== undefined
      ? { behavior: { scaleDown: { stabilizationWindowSeconds: o.scaleDownWindowS } } }
      : {};
  const keda = arm.startsWith("keda");
  return {
    apiVersion: "conveyor.dev/v1alpha1",
    kind: "WorkerPool",
    metadata: { name, namespace: NS },
    spec: {
      queue: name,
      redis: { url: workers.redisUrl },
      handler: { module: workers.handlerModule },
      concurrency: CONCURRENCY,
      maxJobSeconds: 120,
      drainSeconds: 30,
      template: { ...workers.template, env: [{ name: "LOG_LEVEL", value: "warn" }, ...workers.template.env] },
      // KEDA's arms: a fixed replica count switches the operator's autoscaling off; KEDA's HPA
      // moves it through the scale subresource.
      ...(keda ? { replicas: 0 } : {}),
      scaling: {
        mode: "direct",
        minReplicas: 0,
        maxReplicas: o.maxReplicas,
        targetBacklogPerReplica: o.conveyorTargetPerReplica ?? CONCURRENCY,
        ...(arm === "conveyor-latency" ? { targetWaitSeconds: o.targetWaitSeconds } : {}),
        ...behavior,
      },
    },
  };
}

/** The ScaledObject a KEDA user writes for a Conveyor queue: metrics-api on the job API's live counts. */
function scaledObject(name: string, arm: ArmName, apiPort: number, o: AutoscaleOptions): object {
  return {
    apiVersion: "keda.sh/v1alpha1",
    kind: "ScaledObject",
    metadata: { name, namespace: NS },
    spec: {
      scaleTargetRef: { apiVersion: "conveyor.dev/v1alpha1", kind: "WorkerPool", name },
      minReplicaCount: 0,
      maxReplicaCount: o.maxReplicas,
      ...(arm === "keda-tuned" ? { pollingInterval: 5 } : {}),
      ...(o.scaleDownWindowS !== undefined
        ? {
            advanced: {
              horizontalPodAutoscalerConfig: {
                behavior: { scaleDown: { stabilizationWindowSeconds: o.scaleDownWindowS } },
              },
            },
          }
        : {}),
      triggers: [
        {
          type: "metrics-api",
          metadata: {
            url: `http://127.0.0.1:${apiPort}/queues/${name}`,
            valueLocation: "backlog",
            format: "json",
            targetValue: String(CONCURRENCY),
          },
        },
      ],
    },
  };
}

async function startHarness(o: AutoscaleOptions, dir: string): Promise<Harness> {
  const needKeda = o.arms.some((a) => a.startsWith("keda"));
  const assets = needKeda ? ensureKeda() : undefined;
  const real = o.node === "real";
  if (real) {
    progress("autoscale: building the images (make images; cached after the first run)");
    await buildImages();
  }
  progress(
    `autoscale: starting the control plane (HPA controller at the default 15 s), ${real ? "a real node" : "kwok"}, Redis`,
  );
  // The aggregation layer's routable address (198.18.0.0/15, a veth) and a real node's bridge
  // (10.213.N.0/24) are separate networks: KEDA's adapter and the node's pods do not meet.
  const cp = await ControlPlane.start({
    controllers: true,
    scheduler: true,
    kwok: !real,
    aggregation: needKeda,
    hpaSyncPeriod: "15s",
    verbose: false,
  });
  const started: {
    node?: RealNode;
    redis?: RedisServer;
    keda?: KedaProcesses;
    operator?: OperatorProcess;
    api?: Started;
  } = {};
  try {
    await cp.kubectl("apply", "--server-side", "-f", CRD_FILE);
    await cp.waitForCrd("workerpools.conveyor.dev");
    if (real) {
      started.node = await RealNode.start(cp, { verbose: false });
      const t = Date.now();
      await started.node.importImage(WORKER_IMAGE);
      progress(
        `autoscale: node ${started.node.name} Ready (bridge ${started.node.address}/24), ${WORKER_IMAGE} imported in ${((Date.now() - t) / 1000).toFixed(1)} s`,
      );
    }
    // the real node's pods reach Redis at the bridge address
    started.redis = await RedisServer.start(started.node ? { extraBind: [started.node.address] } : {});
    if (assets) {
      progress(`autoscale: starting KEDA (${assets.versions.split("\n")[0] ?? "?"})`);
      started.keda = await startKeda(cp, { dir, assets });
    }
    const metricsApiPort = await freePort();
    started.operator = await startOperator(cp, "autoscale", [
      "--log-level=info",
      "--metrics-api-address=127.0.0.1",
      `--metrics-api-port=${metricsApiPort}`,
      "--metrics-api-client-ca=none",
    ]);
    const apiPort = await freePort();
    started.api = startProcess(
      NODE,
      [
        CONVEYOR,
        "api",
        "--port",
        String(apiPort),
        "--host",
        "127.0.0.1",
        "--read-only",
        "--dashboard",
        "off",
      ],
      {
        logFile: join(dir, "api.log"),
        env: {
          ...process.env,
          REDIS_URL: started.redis.url,
          CONVEYOR_API_KUBERNETES: "off",
          LOG_LEVEL: "warn",
        },
      },
    );
    await pollUntil("job API /healthz", async () => (await fetch(`http://127.0.0.1:${apiPort}/healthz`)).ok, {
      timeoutMs: 60_000,
    });
    const workers = started.node
      ? realWorkers(cp, started.node, started.redis, dir)
      : simulatedWorkers(cp, started.redis, dir);
    return {
      cp,
      redis: started.redis,
      keda: started.keda,
      operator: started.operator,
      api: started.api,
      apiPort,
      workers,
      dir,
    };
  } catch (err) {
    if (started.api) await stopProcess(started.api);
    if (started.operator) await stopProcess(started.operator.proc, 10_000);
    if (started.keda) await started.keda.stop();
    if (started.node) await started.node.stop();
    if (started.redis) await started.redis.stop();
    await cp.stop();
    throw err;
  }
}

async function stopHarness(h: Harness): Promise<void> {
  // the operator and KEDA first: nothing scales the pools back up while the node stops them
  await stopProcess(h.api);
  await stopProcess(h.operator.proc, 10_000);
  if (h.keda) await h.keda.stop();
  await h.workers.stop();
  await h.redis.stop();
  await h.cp.stop();
}

function executionsOf(execLog: string, queue: string): { id: string; t: number; attempt: number }[] {
  if (!existsSync(execLog)) return [];
  const out: { id: string; t: number; attempt: number }[] = [];
  for (const line of readFileSync(execLog, "utf8").split("\n")) {
    if (!line) continue;
    try {
      const e = JSON.parse(line) as { q: string; id: string; t: number; attempt: number };
      if (e.q === queue) out.push({ id: e.id, t: e.t, attempt: e.attempt });
    } catch {
      // a line being written
    }
  }
  return out;
}

async function runOne(h: Harness, arm: ArmName, w: Workload, o: AutoscaleOptions): Promise<RunSummary> {
  const name = `${w.name}-${arm}`;
  const redis = connectRedis(h.redis.url, { name: `bench-autoscale-${name}` });
  const admin = new QueueAdmin(redis);
  const producer = new Producer(redis);
  const kedaArm = arm.startsWith("keda");
  try {
    if (w.resumeAtMs !== undefined) await pauseQueue(redis, name);
    await h.cp.apply(JSON.stringify(workerPool(name, arm, h.workers, o)));
    const deployment = await pollUntil(
      `${name}: the worker Deployment at zero replicas`,
      async () => {
        const d = await poolDeployment(h.cp, name);
        return d && d.spec?.replicas === 0 ? d : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    if (kedaArm) {
      await h.cp.apply(JSON.stringify(scaledObject(name, arm, h.apiPort, o)));
      await pollUntil(
        `${name}: KEDA's ScaledObject Ready with its HPA`,
        async () => {
          const so = await kubeGet<{ status?: { conditions?: { type: string; status: string }[] } }>(
            h.cp,
            `/apis/keda.sh/v1alpha1/namespaces/${NS}/scaledobjects/${name}`,
          );
          const ready = so?.status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
          const hpa = await kubeGet(
            h.cp,
            `/apis/autoscaling/v2/namespaces/${NS}/horizontalpodautoscalers/keda-hpa-${name}`,
          );
          return ready && hpa !== undefined;
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );
    }
    const podsOf = () => h.workers.podsAlive(name, deployment.metadata.name);
    const batches = arrivalBatches(w.arrivals);
    const enqueuedAt = new Map<string, number>();
    const samples: Sample[] = [];
    const t0 = Date.now();
    const sample = async () => {
      const at = Date.now();
      const [d, pods] = await Promise.all([
        poolDeployment(h.cp, name).catch(() => undefined),
        podsOf().catch(() => undefined),
      ]);
      samples.push({
        t: (at - t0) / 1000,
        desired: d?.spec?.replicas ?? samples.at(-1)?.desired ?? 0,
        pods: pods ?? samples.at(-1)?.pods ?? 0,
      });
      return at;
    };
    // the first sample before the first enqueue: with the doorbell the operator scales up within
    // milliseconds of it, faster than a sample taken alongside could read the idle pool
    let last = await sample();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        await sleep(Math.max(0, 1000 - (Date.now() - last)));
        if (sampling) last = await sample();
      }
    })();
    progress(
      `autoscale: ${w.name} × ${arm}: ${w.arrivals.length} jobs over ${Math.round(w.windowMs / 1000)} s`,
    );
    let resumed = w.resumeAtMs === undefined;
    let n = 0;
    for (const batch of batches) {
      for (;;) {
        if (!resumed && Date.now() - t0 >= w.resumeAtMs!) {
          await resumeQueue(redis, name);
          resumed = true;
        }
        const due = t0 + batch[0]!.at - Date.now();
        if (due <= 0) break;
        await sleep(Math.min(due, resumed ? due : Math.max(1, t0 + w.resumeAtMs! - Date.now())));
      }
      const ids = batch.map(() => `${name}-${n++}`);
      const at = Date.now();
      for (const id of ids) enqueuedAt.set(id, at);
      await producer.enqueueMany(
        name,
        batch.map((a, i) => ({ id: ids[i], data: { sleepMs: a.sleepMs } })),
      );
    }
    if (!resumed) {
      await sleep(Math.max(0, t0 + w.resumeAtMs! - Date.now()));
      await resumeQueue(redis, name);
    }
    // The window, then on until every job has started (bounded: three windows).
    let lastLine = 0;
    await pollUntil(
      `${name}: the window over and every job started`,
      async () => {
        const c = await admin.counts(name);
        if (Date.now() - lastLine > 15_000) {
          lastLine = Date.now();
          const s = samples.at(-1);
          progress(
            `  [${Math.round((Date.now() - t0) / 1000)}s] ready ${c.ready} in flight ${c.inflight} done ${c.completed} replicas ${s?.desired ?? 0} pods ${s?.pods ?? 0}`,
          );
        }
        return Date.now() - t0 >= w.windowMs && c.ready === 0 && c.dueDelayed === 0;
      },
      { timeoutMs: 3 * w.windowMs + 60_000, intervalMs: 500 },
    );
    const endMs = Date.now();
    sampling = false;
    await sampler;
    const counters = await admin.counters(name);
    // Tear down before the next arm: the ScaledObject first (KEDA would fight the delete), then
    // the pool; its pods drain (jobs still running finish within the 30 s drain).
    if (kedaArm)
      await h.cp.kubectl("delete", "scaledobject", name, "-n", NS, "--wait=true", "--timeout=120s");
    await h.cp.kubectl("delete", "workerpool", name, "-n", NS, "--wait=true", "--timeout=120s");
    await pollUntil(`${name}: its worker pods gone`, async () => (await podsOf()) === 0, {
      timeoutMs: 120_000,
      intervalMs: 500,
    });
    const summary = summarizeRun({
      arm,
      workload: w.name,
      t0,
      windowMs: w.windowMs,
      endMs,
      enqueuedAt,
      executions: executionsOf(h.workers.execLog, name),
      samples,
      handedBack: counters.handedBack ?? 0,
      stalled: counters.stalled ?? 0,
    });
    progress(
      `  ${w.name} × ${arm}: wait p50 ${summary.waitP50S} s p95 ${summary.waitP95S} s max ${summary.waitMaxS} s, first start ${summary.firstStartS} s, ${summary.podSeconds} pod-s, peak ${summary.maxReplicas}, handed back ${summary.handedBack}`,
    );
    return summary;
  } finally {
    redis.disconnect();
  }
}

/** Runs the arms over the workloads; `onProgress` gets the report so far after each workload (written as it goes). */
export async function runAutoscaleBench(
  o: AutoscaleOptions,
  onProgress: (partial: AutoscaleReport) => void = () => {},
): Promise<AutoscaleReport> {
  const started = Date.now();
  const loadBefore = loadAverage();
  const unavailable: Record<string, string> = {};
  const latency = latencyModeUnavailable();
  let arms = o.arms;
  if (latency && arms.includes("conveyor-latency")) {
    unavailable["conveyor-latency"] = latency;
    arms = arms.filter((a) => a !== "conveyor-latency");
    progress(`autoscale: conveyor-latency ${latency}`);
  }
  // no silent fallback to the simulated node: say why the real one cannot run here
  const whyNot = o.node === "real" ? nodeUnavailable() : undefined;
  if (whyNot) throw new Error(`--node real: ${whyNot}`);
  const hostBefore: HostState | undefined = o.node === "real" ? await hostState() : undefined;
  const dir = mkdtempSync(join(tmpdir(), "cvy-autoscale-"));
  let h: Harness;
  try {
    h = await startHarness({ ...o, arms }, dir);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const workloads: AutoscaleReport["workloads"] = [];
  const report = (): AutoscaleReport => ({
    date: new Date(started).toISOString(),
    profile: o.profile,
    node: nodeDescription(o.node),
    options: o,
    keda: arms.some((a) => a.startsWith("keda")) ? "v2.21.0 (test/keda/install.sh)" : "not run",
    unavailable,
    workloads,
    machine: machineInfo(),
    load: { before: loadBefore, after: loadAverage() },
    seconds: Math.round((Date.now() - started) / 1000),
  });
  try {
    for (const name of o.workloads) {
      const w = buildWorkload(name, o.profile, o.seed);
      const runs: RunSummary[] = [];
      for (const arm of arms) runs.push(await runOne(h, arm, w, o));
      workloads.push({
        name,
        description: w.description,
        windowS: w.windowMs / 1000,
        jobs: w.arrivals.length,
        runs,
      });
      onProgress(report());
    }
  } catch (err) {
    const keep = join(tmpdir(), `cvy-autoscale-failed-${Date.now()}`);
    for (const f of ["keda/keda-operator.log", "keda/keda-adapter.log", "api.log"])
      if (existsSync(join(dir, f)))
        appendFileSync(keep, `==== ${f}\n${readFileSync(join(dir, f), "utf8").slice(-20_000)}\n`);
    appendFileSync(keep, `==== operator\n${readFileSync(h.operator.log, "utf8").slice(-20_000)}\n`);
    if (h.workers.real) appendFileSync(keep, `==== node\n${h.workers.real.logTail(100)}\n`);
    progress(`autoscale: failed; the last logs are in ${keep}`);
    throw err;
  } finally {
    await stopHarness(h);
    rmSync(dir, { recursive: true, force: true });
  }
  if (hostBefore && h.workers.real) {
    const footprint = nodeFootprint(hostBefore, await hostState(), h.workers.real);
    if (footprint.length)
      throw new Error(`--node real: the node left changes on the host:\n  ${footprint.join("\n  ")}`);
    progress("autoscale: host unchanged after the real node (sysctls, iptables, mounts, links, cgroups)");
  }
  return report();
}

/** The workload's waits with every slot (max replicas × concurrency) ready at once: bench/autoscale/report.ts idealWaits. */
function floorOf(r: AutoscaleReport, name: WorkloadName): FloorWaits {
  const w = buildWorkload(name, r.profile, r.options.seed);
  return idealWaits(w.arrivals, r.options.maxReplicas * CONCURRENCY, w.resumeAtMs ?? 0);
}

export function renderAutoscaleMarkdown(r: AutoscaleReport, svgs: Record<string, string>): string {
  const lines = [
    `# Autoscaling: KEDA vs Conveyor — ${r.date.slice(0, 10)}, profile ${r.profile}`,
    "",
    r.profile === "full"
      ? "The full workloads of issue 33."
      : `**Shortened run (profile \`${r.profile}\`)**: fewer jobs and shorter windows than the issue's full workloads (bench/autoscale/traces.ts has both); autoscaler time constants (polling, the HPA's 15 s sync, stabilization) are not shortened, so they weigh more here than in a full run.`,
    "",
    `Node: ${r.node}. KEDA ${r.keda}; Conveyor's pools in \`direct\` mode beside it. Max ${r.options.maxReplicas} replicas, 10 jobs per pod, ${r.options.conveyorTargetPerReplica !== undefined ? `target 10 jobs per replica for KEDA, ${r.options.conveyorTargetPerReplica} for Conveyor` : "target 10 jobs per replica everywhere"}; scale-down stabilization ${r.options.scaleDownWindowS ?? 300} s for every arm. Seed ${r.options.seed}. Load ${r.load.before} → ${r.load.after} (${r.machine.cores} cores, shared; commit ${r.machine.commit}). ${Math.round(r.seconds / 60)} min.`,
    "",
  ];
  if (r.parts)
    for (const p of r.parts)
      lines.push(
        `- Ran ${p.date.slice(11, 16)} UTC: ${p.arms.join(", ")} (load ${p.load.before} → ${p.load.after}, ${Math.round(p.seconds / 60)} min)`,
      );
  for (const [arm, why] of Object.entries(r.unavailable)) lines.push(`- **${arm}**: ${why}`);
  if (r.parts || Object.keys(r.unavailable).length) lines.push("");
  const floors = new Map(r.workloads.map((w) => [w.name, floorOf(r, w.name)]));
  const versus = renderVersus(r.workloads.map((w) => ({ ...w, floor: floors.get(w.name) })));
  if (versus)
    lines.push(
      "## Against KEDA (tuned: pollingInterval 5 s)",
      "",
      "Each Conveyor arm beside KEDA's tuned arm, workload by workload. The floor is the wait with every slot ready at the first enqueue and no start-up (the table's last row in each section): a burst larger than the slots waits for them whoever scales, so the p95 above the floor is what scaling cost.",
      "",
      versus,
      "",
    );
  for (const w of r.workloads) {
    lines.push(`## ${w.name}: ${w.description}`, "", `Window ${w.windowS} s, ${w.jobs} jobs.`, "");
    lines.push(renderTable(w.runs, floors.get(w.name)), "");
    if (svgs[w.name]) lines.push(`![replicas over time, ${w.name}](${svgs[w.name]})`, "");
  }
  return `${lines.join("\n")}\n`;
}

function writeAutoscaleResults(r: AutoscaleReport, outDir: string, name: string): string {
  mkdirSync(outDir, { recursive: true });
  const svgs: Record<string, string> = {};
  for (const w of r.workloads) {
    const file = `${name}-${w.name}.svg`;
    writeFileSync(
      join(outDir, file),
      renderReplicasSvg(
        `${w.name}: desired replicas over time (${r.profile === "full" ? "full run" : `shortened run, profile ${r.profile}`})`,
        w.description,
        w.runs,
      ),
    );
    svgs[w.name] = file;
  }
  writeFileSync(join(outDir, `${name}.json`), `${JSON.stringify(r, null, 2)}\n`);
  const md = join(outDir, `${name}.md`);
  writeFileSync(md, renderAutoscaleMarkdown(r, svgs));
  return md;
}

function listOf<T extends string>(flag: string | undefined, all: readonly T[], what: string): T[] {
  if (flag === undefined) return [...all];
  const items = flag
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const i of items)
    if (!all.includes(i as T)) throw new Error(`--${what}: unknown '${i}' (one of ${all.join(", ")})`);
  return items as T[];
}

export function parseAutoscaleFlags(
  argv: string[],
): AutoscaleOptions & { out: string; name?: string; append: boolean; render: boolean } {
  const flags = parseFlags(argv, [
    "profile",
    "workloads",
    "arms",
    "max-replicas",
    "target-wait",
    "conveyor-target-per-replica",
    "scale-down-window",
    "seed",
    "node",
    "out",
    "name",
    "append",
    "render",
  ]);
  const profile = flags.get("profile") ?? "full";
  if (!PROFILES.includes(profile as ProfileName))
    throw new Error(`--profile must be one of ${PROFILES.join(", ")}, got '${profile}'`);
  const node = flags.get("node") ?? "simulated";
  if (!NODES.includes(node as NodeKind))
    throw new Error(`--node must be one of ${NODES.join(", ")}, got '${node}'`);
  return {
    profile: profile as ProfileName,
    workloads: listOf(flags.get("workloads"), WORKLOADS, "workloads"),
    arms: listOf(flags.get("arms"), ARMS, "arms"),
    maxReplicas: intFlag(flags, "max-replicas", 8),
    targetWaitSeconds: intFlag(flags, "target-wait", 10),
    conveyorTargetPerReplica: flags.has("conveyor-target-per-replica")
      ? intFlag(flags, "conveyor-target-per-replica", CONCURRENCY)
      : undefined,
    scaleDownWindowS: flags.has("scale-down-window") ? intFlag(flags, "scale-down-window", 300) : undefined,
    seed: intFlag(flags, "seed", 33),
    node: node as NodeKind,
    out: resolve(flags.get("out") ?? join(REPO, "bench/results")),
    name: flags.get("name"),
    append: flags.has("append"),
    render: flags.has("render"),
  };
}

if (import.meta.main) {
  runMain("autoscale", async () => {
    const o = parseAutoscaleFlags(process.argv.slice(2));
    const name = o.name ?? `${new Date().toISOString().slice(0, 10)}-autoscale-${o.profile}`;
    const existing = join(o.out, `${name}.json`);
    // --render: the Markdown and charts again from the JSON report, nothing run.
    if (o.render) {
      const md = writeAutoscaleResults(
        JSON.parse(readFileSync(existing, "utf8")) as AutoscaleReport,
        o.out,
        name,
      );
      process.stdout.write(readFileSync(md, "utf8"));
      return;
    }
    // --append: merge into the report already there (arms run in separate invocations).
    const base =
      o.append && existsSync(existing)
        ? (JSON.parse(readFileSync(existing, "utf8")) as AutoscaleReport)
        : undefined;
    const write = (r: AutoscaleReport) =>
      writeAutoscaleResults(base ? mergeReports(base, r) : r, o.out, name);
    const report = await runAutoscaleBench(o, write);
    const md = write(report);
    progress(`autoscale: results in ${md}`);
    process.stdout.write(readFileSync(md, "utf8"));
  });
}

export { writeAutoscaleResults };
