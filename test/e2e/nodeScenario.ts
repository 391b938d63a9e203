// The day-one path on a real node: a control plane, a kubelet with containerd (test/support/
// node.ts), the images `make images` built imported into containerd, and charts/conveyor installed
// with `helm install` — the operator and the job API run as real pods. A two-stage pipeline is
// applied with `kubectl apply`, a burst of jobs scales both pools 0 → N → 0 with real worker pods,
// and the dashboard is reached with `kubectl port-forward`. Shared by `make demo` (test/e2e/demo.ts)
// and test/e2e/nodedemo.test.ts. With `upgrade` (`make upgrade-demo`, test/e2e/upgradeDemo.ts) the
// previous release's chart and images are installed instead, and mid-run, under load, `helm
// upgrade` takes it to this release in two steps: the operator and job API alone (every worker
// pod keeps running), then the workers' image (each pool's pods roll with warm shutdown).
//
// How pods reach the API server (docs/node.md): the API server listens on loopback only; the node
// relays its bridge address (in the API server's certificate) to it, and the chart's pods are told
// that address as KUBERNETES_SERVICE_HOST/PORT. No kube-proxy: the pods have no route beyond the
// bridge and it would write iptables rules in the host's network namespace.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Watch, type V1Pod } from "@kubernetes/client-node";
import { pollUntil } from "../support/poll.ts";
import { connectRedis, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { buildImages, OPERATOR_IMAGE, WORKER_IMAGE } from "../support/containers.ts";
import { ControlPlane, DEFAULT_CONTROLLERS } from "../support/controlplane.ts";
import { hostState, nodeFootprint, RealNode } from "../support/node.ts";
import { PostgresServer } from "../support/postgres.ts";
import { startProcess, stopProcess, type Started } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import type { PreviousImages } from "../support/releases.ts";
import { REPO } from "../support/workers.ts";
import {
  collectOutcome,
  enqueueBurst,
  waitForPoolsReconciled,
  hostPathMounts,
  poolProgress,
  POOLS,
  waitForExternalMetrics,
  workerPoolManifest,
  type StageReport,
} from "./scenario.ts";

/** Where `helm install` puts the operator and the job API. */
export const RELEASE_NS = "conveyor-system";
const RELEASE = "conveyor";
const NS = "default";

export interface Dashboard {
  /** http://127.0.0.1:<port> — `kubectl port-forward` to the job API's Service. */
  url: string;
  token: string;
  /** The admin kubeconfig of the demo's control plane. */
  kubeconfig: string;
}

export interface NodeScenarioOptions {
  jobs: number;
  jobMs: number;
  say: (line: string) => void;
  timeoutMs?: number;
  /**
   * Prepared before the burst; its `take` runs once while both pools have ready worker pods and
   * work left (the screenshots), `close` when it never did.
   */
  midRun?: (d: Dashboard) => Promise<{ take: () => Promise<void>; close: () => Promise<void> }>;
  /** After the summary's facts are collected, before anything stops (`make demo --keep`). */
  beforeStop?: (d: Dashboard) => Promise<void>;

  /** Install this (the previous release) and `helm upgrade` to this release mid-run. */
  upgrade?: PreviousImages;
}

/** What the mid-run `helm upgrade` did (NodeScenarioOptions.upgrade). */
export interface UpgradeReport {
  /** Step 1, operator and job API only: their pods before and after (names). */
  systemPodsBefore: string[];
  systemPodsAfter: string[];
  /** Worker pods running before step 1: still running after it with the same UID, or removed by a scale-down. */
  workerPodsBefore: number;
  workerPodsKept: number;
  workerPodsScaledDown: number;
  /** Worker ReplicaSets (pod template hashes) step 1 created: none when the template did not change. */
  newTemplatesAfterOperatorUpgrade: string[];
  /** Step 2, the workers' image: pods of the previous template that rolled, and their exit codes. */
  workerPodsRolled: number;
  rolledExitCodes: (number | undefined)[];
  /** Jobs enqueued while the upgrade ran (beside the first burst). */
  jobsDuringUpgrade: number;
  /** Seconds each step took. */
  operatorStepSeconds: number;
  workerStepSeconds: number;
}

export interface PodTiming {
  name: string;
  namespace: string;
  pool: string | undefined;
  /** The pod is a rollout's canary (the operator's conveyor.dev/track label). */
  canary?: boolean;
  /** Milliseconds from first seen (created) to phase Running and to Ready, as watched. */
  toRunningMs?: number;
  toReadyMs?: number;
  /** The worker container's exit code as the kubelet reported it. */
  exitCode?: number;
  /** The pod object is gone. */
  deleted?: boolean;
  /** When the watch first saw the pod's deletionTimestamp (ms since the epoch). */
  deleting?: number;
  uid?: string;
  /** Its ReplicaSet's pod template hash (worker pods). */
  templateHash?: string;
  /** When it was first seen Ready (ms since epoch). */
  readyAt?: number;
}

export interface NodeScenarioReport {
  jobs: number;
  seconds: number;
  stages: StageReport[];
  events: Record<string, string[]>;
  /** `kubectl get wp` as printed. */
  getWp: string;
  /** A few `kubectl logs` lines of a worker pod, taken while it ran. */
  logLines: { pod: string; lines: string[] };
  pods: PodTiming[];
  records: number;
  dashboard: Dashboard;
  /** Host settings the node changed (must be empty). */
  footprint: string[];
  /** Seconds from start to the first job enqueued (control plane, node, images, chart). */
  setupSeconds: number;
  upgrade?: UpgradeReport;
}

/** Watches every pod: create → Running/Ready latencies and the worker containers' exit codes. */
export class PodWatcher {
  readonly pods = new Map<string, PodTiming & { seen: number }>();
  private abort: { abort(): void } | undefined;
  private readonly cp: ControlPlane;
  constructor(cp: ControlPlane) {
    this.cp = cp;
  }

  async start(onChange: (line: string) => void): Promise<void> {
    this.abort = await new Watch(this.cp.kubeConfig()).watch(
      "/api/v1/pods",
      {},
      (type: string, pod: V1Pod) => {
        const key = `${pod.metadata!.namespace}/${pod.metadata!.name}`;
        let t = this.pods.get(key);
        if (!t) {
          t = {
            name: pod.metadata!.name!,
            namespace: pod.metadata!.namespace!,
            pool: pod.metadata!.labels?.["conveyor.dev/workerpool"],
            canary: pod.metadata!.labels?.["conveyor.dev/track"] === "canary",
            seen: Date.now(),
            uid: pod.metadata!.uid,
            templateHash: pod.metadata!.labels?.["pod-template-hash"],
          };
          this.pods.set(key, t);
        }
        if (t.toRunningMs === undefined && pod.status?.phase === "Running") {
          t.toRunningMs = Date.now() - t.seen;
        }
        const ready = pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
        if (t.toReadyMs === undefined && ready) {
          t.toReadyMs = Date.now() - t.seen;
          t.readyAt = Date.now();
          onChange(`pod ${key} Ready ${(t.toReadyMs / 1000).toFixed(1)}s after it was created`);
        }
        if (pod.metadata!.deletionTimestamp && t.deleting === undefined) t.deleting = Date.now();
        const term = pod.status?.containerStatuses?.[0]?.state?.terminated;
        if (term && t.exitCode === undefined) {
          t.exitCode = term.exitCode;
          // (how long after the deletion was asked for, against the grace period: a drain's timing)
          const after =
            t.deleting === undefined
              ? ""
              : `, ${((Date.now() - t.deleting) / 1000).toFixed(1)}s after its deletion (grace ${pod.metadata!.deletionGracePeriodSeconds ?? "?"} s)`;
          onChange(`pod ${key} container exited ${term.exitCode} (${term.reason ?? ""})${after}`);
        }
        if (type === "DELETED") t.deleted = true;
      },
      () => {},
    );
  }

  stop(): void {
    this.abort?.abort();
  }
}

/** `kubectl port-forward svc/<job API> :8080` on a free local port; resolves its URL. */
async function portForward(cp: ControlPlane, dir: string): Promise<{ proc: Started; url: string }> {
  const proc = startProcess(
    join(cp.assets.dir, "kubectl"),
    [
      `--kubeconfig=${cp.kubeconfigPath}`,
      "port-forward",
      "-n",
      RELEASE_NS,
      `svc/${RELEASE}-job-api`,
      ":8080", // the local port: one the kernel picks
    ],
    {},
  );
  let out = ""; // "Forwarding from 127.0.0.1:<port> -> 8080" on stdout, errors on stderr
  for (const stream of [proc.child.stdout, proc.child.stderr])
    stream?.on("data", (c: Buffer) => (out += c.toString()));
  const port = await pollUntil(
    "kubectl port-forward listening",
    async () => {
      if (proc.child.exitCode !== null) throw new Error(`kubectl port-forward exited: ${out}`);
      return /Forwarding from 127\.0\.0\.1:(\d+)/.exec(out)?.[1];
    },
    { timeoutMs: 60_000, intervalMs: 100, onTimeout: () => out },
  );
  writeFileSync(join(dir, "port-forward.port"), port);
  return { proc, url: `http://127.0.0.1:${port}` };
}

/** The handler the demo's pools run, from the test fixtures mounted at /handlers. */
export const DEMO_HANDLER = "/handlers/recordingHandler.js";

/**
 * The demo pools' pod template: the image's own pull policy, the handler directory and the
 * execution log (how the demo counts executions, independently of the queue) as hostPath
 * volumes, and `env` beside EXEC_LOG.
 */
export function demoTemplate(dir: string, env: Record<string, string> = {}): object {
  const out = join(dir, "out");
  return {
    imagePullPolicy: "Never",
    env: [
      { name: "EXEC_LOG", value: "/out/executions.ndjson" },
      ...Object.entries(env).map(([name, value]) => ({ name, value })),
    ],
    ...hostPathMounts(out),
  };
}

/** What `startNodeCluster` started: the chart installed on a real node, Redis and PostgreSQL reachable from its pods. */
export interface NodeCluster {
  cp: ControlPlane;
  node: RealNode;
  redisServer: RedisServer;
  pg: PostgresServer;
  redis: RedisClient;
  /** Every pod seen since the chart was installed. */
  watcher: PodWatcher;
  /** The run's files; `<dir>/out` is the hostPath of `demoTemplate`'s execution log. */
  dir: string;
  /** Redis and PostgreSQL as the node's pods reach them. */
  podRedis: string;
  podDatabase: string;
  dashboard: Dashboard;
  /** The chart's values for an operator and a worker image (what `helm upgrade` takes). */
  valuesFor: (operatorImage: string, workerImage: string) => object;
  /** Where the installed values are. */
  valuesFile: string;
  t0: number;
  elapsed: () => string;
  say: (line: string) => void;
  /** Stops everything it started, in the order a cluster would; resolves the host footprint. */
  stop: () => Promise<string[]>;
}

/**
 * The demo's set-up on a real node: images built and imported, control plane, kubelet with
 * containerd, Redis and PostgreSQL, `helm install` of the chart (operator and job API as pods), the
 * external metrics API served, the job API through `kubectl port-forward`, the `demo-db` Secret.
 */
export async function startNodeCluster(
  say: (line: string) => void,
  /** Install the previous release's chart and images instead (`make upgrade-demo`). */
  from?: PreviousImages,
): Promise<NodeCluster> {
  const t0 = Date.now();
  const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(0)}s`;
  const dir = mkdtempSync(join(tmpdir(), "cvy-demo-"));
  let cp: ControlPlane | undefined;
  let node: RealNode | undefined;
  let redisServer: RedisServer | undefined;
  let pg: PostgresServer | undefined;
  let redis: RedisClient | undefined;
  let watcher: PodWatcher | undefined;
  let forward: Started | undefined;
  const before = await hostState();
  try {
    say("building the images (make images; cached after the first run)…");
    await buildImages();
    say(`[${elapsed()}] images ready: ${WORKER_IMAGE}, ${OPERATOR_IMAGE}`);
    if (from) say(`previous release: ${from.operatorImage}, ${from.workerImage}, chart ${from.chartDir}`);

    const address = RealNode.freeAddress();
    say(
      "starting the control plane (etcd, kube-apiserver, controller-manager with the HPA controller, scheduler)…",
    );
    cp = await ControlPlane.start({
      controllers: [
        ...DEFAULT_CONTROLLERS,
        // the kube-root-ca.crt ConfigMap every pod's ServiceAccount token volume includes
        "root-ca-certificate-publisher-controller",
        // the operator's Service endpoints: the aggregation layer routes the external metrics API there
        "endpointslice-controller",
        "endpoints-controller",
      ],
      scheduler: true,
      aggregation: true,
      apiServerIPs: [address],
      serviceAccountTokens: true,
      verbose: false,
    });
    say(`[${elapsed()}] control plane ${cp.version} up`);
    say("starting a real node: containerd + kubelet (test/support/node.ts)…");
    node = await RealNode.start(cp, { address, verbose: false });
    say(`[${elapsed()}] node ${node.name} Ready (bridge ${node.bridge}, ${address}/24)`);
    const n = node;
    const importing = (async () => {
      for (const image of [
        OPERATOR_IMAGE,
        WORKER_IMAGE,
        ...(from ? [from.operatorImage, from.workerImage] : []),
      ]) {
        const ti = Date.now();
        await n.importImage(image);
        say(`[${elapsed()}] ${image} imported into containerd in ${((Date.now() - ti) / 1000).toFixed(1)}s`);
      }
    })();
    say("importing the images into containerd (podman save → ctr images import)…");
    [redisServer, pg] = await Promise.all([
      RedisServer.start({ extraBind: [address] }),
      PostgresServer.start({ extraListen: [address] }),
    ]);
    redis = connectRedis(redisServer.url);
    const podRedis = `redis://${address}:${redisServer.port}`;
    const podDatabase = `postgres://postgres@${address}:${pg.port}/postgres`;
    say(`Redis and PostgreSQL on 127.0.0.1 and ${address} (the node's pods reach them there)`);
    const api = await node.apiServerRelay();
    await importing;

    watcher = new PodWatcher(cp);
    await watcher.start((line) => say(`  [${elapsed()}] ${line}`));

    // Credentials only through Secrets: the API token, the job records' database URL.
    const token = randomBytes(24).toString("hex");
    await cp.kubectl("create", "namespace", RELEASE_NS);
    await cp.kubectl(
      "-n",
      RELEASE_NS,
      "create",
      "secret",
      "generic",
      "conveyor-api-token",
      `--from-literal=token=${token}`,
    );
    await cp.kubectl(
      "-n",
      RELEASE_NS,
      "create",
      "secret",
      "generic",
      "conveyor-db",
      `--from-literal=url=${podDatabase}`,
    );
    const kubeEnv = [
      { name: "KUBERNETES_SERVICE_HOST", value: api.host },
      { name: "KUBERNETES_SERVICE_PORT", value: String(api.port) },
    ];
    const image = (ref: string) => ({
      repository: ref.slice(0, ref.lastIndexOf(":")),
      tag: ref.slice(ref.lastIndexOf(":") + 1),
    });
    const valuesFor = (operatorImage: string, workerImage: string) => ({
      operator: {
        replicas: 1,
        image: { ...image(operatorImage), pullPolicy: "Never" },
        extraEnv: kubeEnv,
      },
      worker: { image: image(workerImage) },
      jobApi: {
        enabled: true,
        replicas: 1,
        redis: { url: podRedis },
        auth: { secretRef: { name: "conveyor-api-token" } },
        database: { secretRef: { name: "conveyor-db" } },
        pools: { enabled: true },
        extraEnv: kubeEnv,
      },
    });
    const valuesFile = join(dir, "values.json");
    writeFileSync(
      valuesFile,
      JSON.stringify(
        valuesFor(from?.operatorImage ?? OPERATOR_IMAGE, from?.workerImage ?? WORKER_IMAGE),
        null,
        2,
      ),
    );
    const chart = from?.chartDir ?? join(REPO, "charts", "conveyor");
    say(`helm install conveyor ${chart} (the operator and the job API as pods on the node)…`);
    await cp.helm("install", RELEASE, chart, "-n", RELEASE_NS, "-f", valuesFile);
    await pollUntil(
      "the operator and the job API Ready",
      async () => {
        const pods = [...watcher!.pods.values()].filter((p) => p.namespace === RELEASE_NS);
        return pods.length >= 2 && pods.every((p) => p.toReadyMs !== undefined);
      },
      { timeoutMs: 180_000, intervalMs: 250, onTimeout: () => node!.logTail() },
    );
    await waitForExternalMetrics(cp);
    say(`[${elapsed()}] operator and job API Running; external.metrics.k8s.io served by the operator pod`);

    const pf = await portForward(cp, dir);
    forward = pf.proc;
    const dashboard: Dashboard = { url: pf.url, token, kubeconfig: cp.kubeconfigPath };
    await pollUntil(
      "the dashboard through kubectl port-forward",
      async () => (await fetch(`${pf.url}/healthz`)).ok,
      {
        timeoutMs: 60_000,
      },
    );
    say(`dashboard: ${dashboard.url}  (kubectl port-forward -n ${RELEASE_NS} svc/${RELEASE}-job-api)`);
    say(`API token: ${token}`);
    await cp.kubectl("create", "secret", "generic", "demo-db", `--from-literal=url=${podDatabase}`);

    const cluster = {
      cp,
      node,
      redisServer,
      pg,
      redis,
      watcher,
      dir,
      podRedis,
      podDatabase,
      dashboard,
      valuesFor,
      valuesFile,
      t0,
      elapsed,
      say,
      stop: stopAll,
    };
    return cluster as NodeCluster;
  } catch (err) {
    await stopAll().catch(() => {});
    throw err;
  }

  /** Stops what this run started, in the order a cluster would; returns the host footprint. */
  async function stopAll(): Promise<string[]> {
    say("stopping everything this run started…");
    watcher?.stop();
    if (forward) await stopProcess(forward, 5000);
    if (cp && node) {
      // the operator first (or it would scale pools back up), then the pools' Deployments
      await cp.kubectl("-n", RELEASE_NS, "scale", "deployment", "--all", "--replicas=0").catch(() => "");
      await cp.kubectl("-n", NS, "scale", "deployment", "--all", "--replicas=0").catch(() => "");
    }
    await node?.stop();
    redis?.disconnect();
    await redisServer?.stop();
    await pg?.stop();
    await cp?.stop();
    if (process.env.CONVEYOR_KEEP_TMP) say(`files kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
    const footprint = node ? nodeFootprint(before, await hostState(), node) : [];
    node = undefined;
    cp = undefined;
    return footprint;
  }
}

export async function runNodeScenario(opts: NodeScenarioOptions): Promise<NodeScenarioReport> {
  const from = opts.upgrade;
  const c = await startNodeCluster(opts.say, from);
  const { cp, redis, pg, watcher, dir, podRedis, dashboard, t0, say, elapsed } = c;
  /** Jobs enqueued in all: the burst, and those enqueued while an upgrade runs. */
  let jobsTotal = opts.jobs;
  let midRunStep: Awaited<ReturnType<NonNullable<NodeScenarioOptions["midRun"]>>> | undefined;
  try {
    // The pipeline, as a user applies it. The handler directory and the execution log (how the
    // demo counts executions, independently of the queue) are hostPath volumes.
    const template = demoTemplate(dir);
    const manifests = POOLS.map((p) =>
      workerPoolManifest(p, { redisUrl: podRedis, handler: DEMO_HANDLER, template }),
    );
    const file = join(dir, "pipeline.yaml");
    writeFileSync(file, manifests.map((m) => JSON.stringify(m)).join("\n---\n"));
    say(
      `kubectl apply -f pipeline.yaml:\n${(await cp.kubectl("apply", "-f", file)).trimEnd().replace(/^/gm, "  ")}`,
    );

    await waitForPoolsReconciled(cp, say);
    midRunStep = opts.midRun ? await opts.midRun(dashboard) : undefined;
    const setupSeconds = (Date.now() - t0) / 1000;
    const started = Date.now();
    await enqueueBurst(redis, opts);
    const admin = new QueueAdmin(redis);
    const progress = poolProgress(cp, admin, started, say);
    let midRun: Promise<void> | undefined;
    let upgrading: Promise<UpgradeReport> | undefined;
    let upgradeReport: UpgradeReport | undefined;
    let upgradeFailed: Error | undefined;
    let logLines: { pod: string; lines: string[] } | undefined;
    let logsTaking: Promise<void> | undefined;
    await pollUntil(
      "all jobs through both stages and both pools back at zero",
      async () => {
        const { atZero, pools } = await progress.poll();
        const bothServing = pools.every((p) => p.ready >= 1);
        const workLeft = pools.some((p) => p.backlog > 0);
        if (upgradeFailed) throw upgradeFailed;
        if (bothServing && workLeft && from && !upgrading) {
          upgrading = upgradeMidRun(from);
          upgrading.then(
            (r) => (upgradeReport = r),
            (err: Error) => (upgradeFailed = err),
          );
        }
        if (bothServing && workLeft && !midRun && midRunStep) {
          midRun = midRunStep.take().catch((err: Error) => say(`  (mid-run step failed: ${err.message})`));
        }
        // a few lines of a running worker's log, while it still exists (scale-down deletes it)
        if (bothServing && !logsTaking) {
          logsTaking = (async () => {
            const pods = [...watcher!.pods.values()].filter((p) => p.pool === POOLS[1].name && p.toReadyMs);
            const pod = pods[0]?.name;
            if (!pod) {
              logsTaking = undefined;
              return;
            }
            await pollUntil(
              `job log lines from ${pod}`,
              async () => {
                const out = await cp!.kubectl("logs", pod, "--tail=3");
                const lines = out.split("\n").filter((l) => l.trim() !== "");
                if (lines.length >= 3) logLines = { pod, lines };
                return lines.length >= 3;
              },
              { timeoutMs: 30_000 },
            ).catch(() => {});
          })();
        }
        const upgraded = !from || upgradeReport !== undefined;
        const done = upgraded && (await admin.counts(POOLS[1].queue)).completed >= jobsTotal;
        const workersLeft = [...watcher!.pods.values()].filter((p) => p.pool && !p.deleted);
        return done && atZero && workersLeft.length === 0;
      },
      { timeoutMs: opts.timeoutMs ?? 15 * 60_000, intervalMs: 1000 },
    );
    const seconds = (Date.now() - started) / 1000;
    await (midRun ?? midRunStep?.close());
    await logsTaking;
    say(`all ${jobsTotal} jobs through both stages; both pools back at zero after ${seconds.toFixed(0)}s`);

    const getWp = await cp.kubectl("get", "wp");
    const executionLog = join(dir, "out", "executions.ndjson");
    const outcome = await collectOutcome(cp, admin, pg, {
      executionLog,
      maxReplicas: progress.maxReplicas,
      jobs: jobsTotal,
      ...(from ? { recordsFrom: "end" as const } : {}),
    });
    await opts.beforeStop?.(dashboard);
    const report = {
      jobs: jobsTotal,
      ...(upgradeReport ? { upgrade: upgradeReport } : {}),
      seconds,
      ...outcome,
      getWp,
      logLines: logLines ?? { pod: "(none)", lines: [] },
      pods: [...watcher.pods.values()].map(({ seen: _seen, ...t }) => t),
      dashboard,
      footprint: [] as string[],
      setupSeconds,
    };
    const stopped = await c.stop();
    report.footprint = stopped;
    return report;
  } catch (err) {
    await midRunStep?.close().catch(() => {});
    await c.stop().catch(() => {});
    throw err;
  }

  /**
   * `helm upgrade` from the previous release under load, in two steps: the new CRD, then this
   * chart with this operator image but the previous worker image (only the operator and the job
   * API change: every worker pod must keep running), then this worker image too (each pool's pods
   * roll with warm shutdown and exit 0). Jobs keep coming meanwhile.
   */
  async function upgradeMidRun(prev: PreviousImages): Promise<UpgradeReport> {
    const { valuesFor, valuesFile } = c;
    const w = watcher;
    const producer = new Producer(redis);
    let during = 0;
    let producing = true;
    let report: UpgradeReport | undefined;
    // the load through the upgrade: 20 jobs every half second on the first stage
    const load = (async () => {
      while (producing) {
        const batch = Array.from({ length: 20 }, () => ({
          id: `doc-${jobsTotal + during++}`,
          data: { sleepMs: opts.jobMs, result: { sleepMs: opts.jobMs * 3 } },
        }));
        await producer.enqueueMany(POOLS[0].queue, batch);
        await new Promise((r) => setTimeout(r, 500));
      }
    })();
    try {
      const system = () =>
        [...w.pods.values()].filter((p) => p.namespace === RELEASE_NS && !p.deleted).map((p) => p.name);
      const liveWorkers = () =>
        [...w.pods.values()].filter((p) => p.pool && !p.deleted && p.toReadyMs !== undefined);
      const hashes = async () =>
        new Set(
          (
            JSON.parse(
              await cp.kubectl("-n", NS, "get", "rs", "-l", "conveyor.dev/workerpool", "-o", "json"),
            ) as {
              items: { metadata: { labels: Record<string, string> } }[];
            }
          ).items.map((rs) => rs.metadata.labels["pod-template-hash"]!),
        );
      say(
        `  [${elapsed()}] upgrade: kubectl apply --server-side -f charts/conveyor/crds/ (this release's CRD first)`,
      );
      const crdOut = await cp.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        join(REPO, "charts", "conveyor", "crds"),
      );
      say(`    ${crdOut.trim()}`);

      // step 1: the operator and the job API only
      const t1 = Date.now();
      const systemBefore = system();
      const workersBefore = liveWorkers().map((p) => ({ name: p.name, uid: p.uid }));
      const hashesBefore = await hashes();
      say(
        `  [${elapsed()}] upgrade step 1: helm upgrade to this chart and operator image, workers still on ${prev.workerImage} (${workersBefore.length} worker pods running: ${workersBefore.map((p) => p.name).join(", ")})`,
      );
      const step1 = join(dir, "values-step1.json");
      writeFileSync(step1, JSON.stringify(valuesFor(OPERATOR_IMAGE, prev.workerImage), null, 2));
      await cp.helm("upgrade", RELEASE, join(REPO, "charts", "conveyor"), "-n", RELEASE_NS, "-f", step1);
      const replaced = await pollUntil(
        "the operator and the job API replaced by Ready pods of this release",
        async () => {
          const now = [...w.pods.values()].filter((p) => p.namespace === RELEASE_NS && !p.deleted);
          const fresh = now.filter((p) => !systemBefore.includes(p.name) && p.readyAt !== undefined);
          return now.length === 2 && fresh.length === 2 ? fresh : undefined;
        },
        { timeoutMs: 180_000, intervalMs: 250 },
      );
      const operatorReady = Math.max(...replaced.map((p) => p.readyAt!));
      say(`  [${elapsed()}] upgrade step 1: ${replaced.map((p) => p.name).join(", ")} Ready; old pods gone`);
      // the new operator has reconciled each pool once it wrote the pool's status after it was Ready
      await pollUntil(
        "this release's operator reconciled both pools",
        async () => {
          const pools = JSON.parse(
            await cp.kubectl("-n", NS, "get", "wp", "-o", "json", "--show-managed-fields"),
          ) as {
            items: { metadata: { managedFields?: { subresource?: string; time?: string }[] } }[];
          };
          return pools.items.every((p) =>
            (p.metadata.managedFields ?? []).some(
              (m) => m.subresource === "status" && Date.parse(m.time ?? "") >= operatorReady + 1000,
            ),
          );
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );
      const hashesAfter = await hashes();
      const newTemplates = [...hashesAfter].filter((h) => !hashesBefore.has(h));
      const kept = workersBefore.filter((b) =>
        [...w.pods.values()].some(
          (p) => p.name === b.name && p.uid === b.uid && !p.deleted && p.exitCode === undefined,
        ),
      ).length;
      const operatorStepSeconds = (Date.now() - t1) / 1000;
      say(
        `  [${elapsed()}] upgrade step 1 done in ${operatorStepSeconds.toFixed(0)}s: worker pods kept ${kept}/${workersBefore.length} (same UIDs; ${workersBefore.length - kept} removed by scale-down), new pod templates ${newTemplates.length}`,
      );

      // step 2: the workers' image
      const t2 = Date.now();
      const oldTemplates = new Set(hashesAfter);
      say(
        `  [${elapsed()}] upgrade step 2: helm upgrade with this worker image ${WORKER_IMAGE} (each pool rolls)`,
      );
      writeFileSync(valuesFile, JSON.stringify(valuesFor(OPERATOR_IMAGE, WORKER_IMAGE), null, 2));
      await cp.helm("upgrade", RELEASE, join(REPO, "charts", "conveyor"), "-n", RELEASE_NS, "-f", valuesFile);
      // (the chart passes the worker image to the operator: its pod restarts, then each pool rolls)
      const rolled = await pollUntil(
        "every worker pod of the previous image replaced",
        async () => {
          const old = [...w.pods.values()].filter(
            (p) => p.pool && p.templateHash && oldTemplates.has(p.templateHash),
          );
          const live = old.filter((p) => !p.deleted);
          return newTemplatesSeen() && live.length === 0 ? old : undefined;
        },
        { timeoutMs: 300_000, intervalMs: 500 },
      );
      function newTemplatesSeen(): boolean {
        return [...w.pods.values()].some(
          (p) => p.pool && p.templateHash && !oldTemplates.has(p.templateHash),
        );
      }
      const workerStepSeconds = (Date.now() - t2) / 1000;
      const ranOld = rolled.filter((p) => p.readyAt !== undefined && p.readyAt < t2);
      say(
        `  [${elapsed()}] upgrade step 2 done in ${workerStepSeconds.toFixed(0)}s: ${ranOld.length} worker pods of the previous image rolled, exit codes ${[...new Set(ranOld.map((p) => p.exitCode))].join(", ")}`,
      );
      report = {
        systemPodsBefore: systemBefore,
        systemPodsAfter: system(),
        workerPodsBefore: workersBefore.length,
        workerPodsKept: kept,
        workerPodsScaledDown: workersBefore.length - kept,
        newTemplatesAfterOperatorUpgrade: newTemplates,
        workerPodsRolled: ranOld.length,
        rolledExitCodes: ranOld.map((p) => p.exitCode),
        jobsDuringUpgrade: 0,
        operatorStepSeconds,
        workerStepSeconds,
      };
      return report;
    } finally {
      producing = false;
      await load;
      jobsTotal += during;
      if (report) report.jobsDuringUpgrade = during;
      say(`  [${elapsed()}] upgrade: ${during} jobs enqueued while it ran; ${jobsTotal} in all`);
    }
  }
}
