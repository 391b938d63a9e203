// The day-one path, end to end on this machine: a real control plane (API server, controller
// manager with the HPA controller, scheduler, kwok), Redis, PostgreSQL, the operator serving
// its external metric through the aggregation layer, and real worker processes for the pods the
// Deployments get (test/support/podRunner.ts). A burst of jobs goes through a two-stage
// pipeline; both pools scale 0 → N → 0. Shared by `make demo` and test/e2e/e2e.test.ts.
//
// runtime "containers" (`make demo RUNTIME=containers`, test/e2e/containers.test.ts): the built
// images instead of processes from this checkout — `helm install` of charts/conveyor runs the
// operator from its image (as its ServiceAccount, in-cluster config), and the pools' pods run the
// worker image with the handler directory mounted (a hostPath volume of the pool's template).
// Pools scale in `direct` mode there: the chart's external metrics APIService would need the
// operator pod reachable at a Service address, which pods on the host network are not.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectRedis, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { buildImages } from "../support/containers.ts";
import { ControlPlane } from "../support/controlplane.ts";
import { pollUntil } from "../support/poll.ts";
import { PodRunner } from "../support/podRunner.ts";
import { freePort } from "../support/ports.ts";
import { PostgresServer } from "../support/postgres.ts";
import { startProcess, stopProcess, type Started } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { countBy, CONVEYOR, NODE, readExecutions, RECORDING_HANDLER, REPO } from "../support/workers.ts";

export interface ScenarioOptions {
  jobs: number;
  /** How long each job's handler works. */
  jobMs: number;
  /** Progress lines for a person (the demo) or the test log. */
  say: (line: string) => void;
  timeoutMs?: number;
  /** "process" (default): worker processes from this checkout; "containers": the built images. */
  runtime?: "process" | "containers";
}

export interface StageReport {
  pool: string;
  queue: string;
  maxReplicas: number;
  completed: number;
  executions: number;
  /** Jobs that ran more than once at this stage. */
  ranTwice: number;
  stalled: number;
  handedBack: number;
}

export interface ScenarioReport {
  jobs: number;
  seconds: number;
  stages: StageReport[];
  /** Reasons of the Events on each WorkerPool, in order. */
  events: Record<string, string[]>;
  workerExitCodes: (number | string)[];
  podsRun: number;
  records: number;
}

const NS = "default";
/** Where `helm install` puts the operator (runtime "containers"). */
const RELEASE_NS = "conveyor-system";
// The second stage is the slow one (as summarizing is beside extracting): its per-replica rate is
// bound by the handler's sleep, not by the machine's CPU, so its backlog grows past one replica's
// share whatever the load and both pools must scale beyond one replica.
export const SUMMARIZE_FACTOR = 3;
export const POOLS = [
  { name: "demo-extract", queue: "demo/extract", next: "demo/summarize" },
  { name: "demo-summarize", queue: "demo/summarize" },
] as const;

type Pool = (typeof POOLS)[number];

/** A pool of the demo pipeline as a user writes it; the runtimes differ in Redis, handler, pod template, mode. */
export function workerPoolManifest(
  p: Pool,
  o: { redisUrl: string; handler: string; template: object; mode?: "direct" },
): object {
  return {
    apiVersion: "conveyor.dev/v1alpha1",
    kind: "WorkerPool",
    metadata: { name: p.name, namespace: NS },
    spec: {
      queue: p.queue,
      ...("next" in p ? { nextQueue: p.next } : {}),
      redis: { url: o.redisUrl },
      database: { secretRef: { name: "demo-db" } },
      handler: { module: o.handler },
      concurrency: 8,
      maxJobSeconds: 60,
      drainSeconds: 30,
      template: o.template,
      scaling: {
        ...(o.mode ? { mode: o.mode } : {}),
        minReplicas: 0,
        maxReplicas: 6,
        targetBacklogPerReplica: 100,
        activationBacklog: 0,
        cooldownSeconds: 10,
        pollSeconds: 2,
        behavior: { scaleDown: { stabilizationWindowSeconds: 5 } },
      },
    },
  };
}

/** The handler directory and `execDir` (the execution log) as hostPath volumes of the image's pods. */
export function hostPathMounts(execDir: string): { volumes: object[]; volumeMounts: object[] } {
  mkdirSync(execDir, { recursive: true, mode: 0o777 });
  chmodSync(execDir, 0o777); // the worker image's uid 65532 appends to the log
  return {
    volumes: [
      { name: "handlers", hostPath: { path: join(REPO, "test", "fixtures") } },
      { name: "out", hostPath: { path: execDir } },
    ],
    volumeMounts: [
      { name: "handlers", mountPath: "/handlers", readOnly: true },
      { name: "out", mountPath: "/out" },
    ],
  };
}

/** The burst: `jobs` documents on the first stage, each `jobMs` there and SUMMARIZE_FACTOR times that next. */
/**
 * As docs/records.md asks of a producer: the first jobs wait for the operator's first reconcile of
 * each pool (Ready set), which switches the pipeline's records on — else they have no enqueue record.
 */
export async function waitForPoolsReconciled(cp: ControlPlane, say: (line: string) => void): Promise<void> {
  const names = POOLS.map((p) => `workerpool/${p.name}`);
  await cp.kubectl("wait", "-n", NS, "--for=condition=Ready", "--timeout=120s", ...names);
  say(`kubectl wait --for=condition=Ready ${names.join(" ")}: reconciled, records on`);
}

export async function enqueueBurst(redis: RedisClient, opts: ScenarioOptions): Promise<void> {
  await new Producer(redis).enqueueMany(
    POOLS[0].queue,
    Array.from({ length: opts.jobs }, (_, i) => ({
      id: `doc-${i}`,
      data: { sleepMs: opts.jobMs, result: { sleepMs: opts.jobMs * SUMMARIZE_FACTOR } },
    })),
  );
  opts.say(`enqueued ${opts.jobs} jobs on ${POOLS[0].queue}; watching the pools scale (kubectl get wp -w):`);
}

export async function waitForExternalMetrics(cp: ControlPlane): Promise<void> {
  await pollUntil(
    "external metrics APIService available",
    async () =>
      (
        await cp.kubectl(
          "get",
          "apiservice",
          "v1beta1.external.metrics.k8s.io",
          "-o",
          'jsonpath={.status.conditions[?(@.type=="Available")].status}',
        )
      ).trim() === "True",
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}

/** What every run must show at each stage: each job once, none handed back or stalled, scaled beyond one. */
export function assertStages(stages: StageReport[], jobs: number): void {
  for (const s of stages) {
    assert.equal(s.completed, jobs, `${s.pool} completed`);
    assert.equal(s.executions, jobs, `${s.pool}: every job ran exactly once at this stage`);
    assert.equal(s.ranTwice, 0);
    assert.equal(s.handedBack, 0, `${s.pool}: nothing handed back by a scale-down`);
    assert.equal(s.stalled, 0, `${s.pool}: no lease expired`);
    assert.ok(s.maxReplicas > 1, `${s.pool} scaled beyond one replica (peak ${s.maxReplicas})`);
  }
}

/** What each poll of the pools saw: all at zero replicas; each pool's ready replicas and backlog. */
export interface PoolsSeen {
  atZero: boolean;
  pools: { ready: number; backlog: number }[];
}

/**
 * The progress table (kubectl get wp -w): each poll prints the pools' line when it changed, since
 * `started`, and keeps each pool's highest replica count.
 */
export function poolProgress(cp: ControlPlane, admin: QueueAdmin, started: number, say: (l: string) => void) {
  const maxReplicas = new Map<string, number>();
  let lastLine = "";
  return {
    maxReplicas,
    async poll(): Promise<PoolsSeen> {
      const parts: string[] = [];
      const seen: PoolsSeen = { atZero: true, pools: [] };
      for (const p of POOLS) {
        const wp = JSON.parse(await cp.kubectl("get", "wp", p.name, "-o", "json")) as {
          status?: { replicas?: number; readyReplicas?: number; desiredReplicas?: number };
        };
        const s = wp.status ?? {};
        const counts = await admin.counts(p.queue);
        const replicas = s.replicas ?? 0;
        maxReplicas.set(p.name, Math.max(maxReplicas.get(p.name) ?? 0, replicas, s.desiredReplicas ?? 0));
        if (replicas > 0 || (s.desiredReplicas ?? 0) > 0) seen.atZero = false;
        seen.pools.push({ ready: s.readyReplicas ?? 0, backlog: counts.backlog });
        parts.push(
          `${p.name}: backlog ${String(counts.backlog).padStart(4)} in-flight ${String(counts.inflight).padStart(3)} replicas ${s.readyReplicas ?? 0}/${s.desiredReplicas ?? 0} done ${String(counts.completed).padStart(4)}`,
        );
      }
      const line = parts.join(" | ");
      if (line !== lastLine)
        say(`  [${String(Math.round((Date.now() - started) / 1000)).padStart(3)}s] ${line}`);
      lastLine = line;
      return seen;
    },
  };
}

/** After the run: each stage's executions (from the log) and counters, the pools' Events, the records. */
export async function collectOutcome(
  cp: ControlPlane,
  admin: QueueAdmin,
  pg: PostgresServer,
  o: {
    executionLog: string;
    maxReplicas: Map<string, number>;
    jobs: number;
    /**
     * Count records from their enqueue on (created_at and data; the default), or every job's
     * record of its end: a pipeline started under 0.1.0, whose operator left records off until the
     * first worker's recorder, has no enqueue records for its first jobs (`make upgrade-demo`).
     */
    recordsFrom?: "enqueue" | "end";
  },
): Promise<Pick<ScenarioReport, "stages" | "events" | "records">> {
  const executions = readExecutions(o.executionLog);
  const stages: StageReport[] = [];
  for (const p of POOLS) {
    const mine = executions.filter((e) => e.q === p.queue);
    const perJob = countBy(mine, (e) => e.id);
    const counters = await admin.counters(p.queue);
    stages.push({
      pool: p.name,
      queue: p.queue,
      maxReplicas: o.maxReplicas.get(p.name) ?? 0,
      completed: (await admin.counts(p.queue)).completed,
      executions: mine.length,
      ranTwice: [...perJob.values()].filter((n) => n > 1).length,
      stalled: counters.stalled ?? 0,
      handedBack: counters.handedBack ?? 0,
    });
  }
  const events: Record<string, string[]> = {};
  for (const p of POOLS) {
    const list = JSON.parse(
      await cp.kubectl(
        "get",
        "events",
        "--field-selector",
        `involvedObject.name=${p.name},involvedObject.kind=WorkerPool`,
        "--sort-by=.firstTimestamp",
        "-o",
        "json",
      ),
    ) as { items: { reason: string }[] };
    events[p.name] = list.items.map((e) => e.reason);
  }
  // (from the enqueue on: created_at and its data, not only its later transitions)
  const fromEnqueue =
    (o.recordsFrom ?? "enqueue") === "enqueue" ? " and created_at is not null and data is not null" : "";
  const countRecords = `select count(*) as n from conveyor_jobs where state = 'completed' and queue = $1${fromEnqueue}`;
  const records = await pollUntil(
    "job records in PostgreSQL",
    async () => {
      const rows = await pg.query<{ n: string }>(countRecords, [POOLS[1].queue]);
      return Number(rows[0]!.n) >= o.jobs ? Number(rows[0]!.n) : undefined;
    },
    { timeoutMs: 120_000 },
  ).catch(() => -1);
  return { stages, events, records };
}

export async function runScenario(opts: ScenarioOptions): Promise<ScenarioReport> {
  const dir = mkdtempSync(join(tmpdir(), "cvy-e2e-"));
  const say = opts.say;
  let cp: ControlPlane | undefined;
  let redisServer: RedisServer | undefined;
  let pg: PostgresServer | undefined;
  let operator: Started | undefined;
  let runner: PodRunner | undefined;
  let operatorRunner: PodRunner | undefined;
  let redis: RedisClient | undefined;
  try {
    say(
      "starting the control plane (etcd, kube-apiserver, controller-manager with the HPA controller, scheduler, kwok)…",
    );
    cp = await ControlPlane.start({
      controllers: true,
      scheduler: true,
      kwok: true,
      aggregation: true,
      verbose: false,
    });
    await cp.kubectl("apply", "--server-side", "-f", join(REPO, "crds", "conveyor.dev_workerpools.yaml"));
    await cp.waitForCrd("workerpools.conveyor.dev");
    say(`control plane ${cp.version} up; CRD installed`);

    redisServer = await RedisServer.start();
    pg = await PostgresServer.start();
    redis = connectRedis(redisServer.url);
    say(`Redis on ${redisServer.url}, PostgreSQL for job records`);

    const containers = opts.runtime === "containers";
    if (containers) {
      say("building the images (make images; cached)…");
      await buildImages();
      // The chart as a user installs it, the operator pod run from its image by the pod runner.
      const metricsPort = await freePort();
      await cp.helm(
        "install",
        "conveyor",
        join(REPO, "charts", "conveyor"),
        "--namespace",
        RELEASE_NS,
        "--create-namespace",
        "--set",
        "operator.replicas=1",
        "--set",
        `operator.metricsPort=${metricsPort}`,
        "--set",
        "metrics.mode=direct",
      );
      operatorRunner = new PodRunner(cp.kubeConfig(), {
        namespace: RELEASE_NS,
        labelSelector: "app.kubernetes.io/component=operator",
        dir,
        runtime: "containers",
        assignPort: false,
        onEvent: (line) => say(`  ${line}`),
      });
      operatorRunner.start();
      await pollUntil(
        "the operator container ready",
        async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).ok,
        { timeoutMs: 180_000 },
      );
      say("helm install charts/conveyor: the operator runs from its image (metrics.mode=direct)");
    } else {
      // The operator's external metrics endpoint must be on a routable (non-loopback) address.
      const routable = await cp.routableAddress();
      const cert = await cp.issueServingCert("conveyor-operator-metrics", {
        ips: [routable.address],
        dnsNames: [`conveyor-operator-metrics.${NS}.svc`],
      });
      const metricsApiPort = await freePort();
      const metricsPort = await freePort();
      operator = startProcess(
        NODE,
        [
          CONVEYOR,
          "operator",
          `--kubeconfig=${cp.kubeconfigPath}`,
          "--identity=demo-operator",
          "--metrics-address=127.0.0.1",
          `--metrics-port=${metricsPort}`,
          `--leader-election-namespace=${NS}`,
          "--worker-image=conveyor-worker:demo",
          `--metrics-api-address=${routable.address}`,
          `--metrics-api-port=${metricsApiPort}`,
          `--metrics-api-cert=${cert.certFile}`,
          `--metrics-api-key=${cert.keyFile}`,
          "--metrics-api-client-ca=auto",
        ],
        { logFile: join(dir, "operator.log"), env: { ...process.env, POD_NAME: "" } },
      );
      await pollUntil(
        "operator ready",
        async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).ok,
        { timeoutMs: 120_000 },
      );
      await cp.registerAPIService({
        group: "external.metrics.k8s.io",
        version: "v1beta1",
        address: routable.address,
        port: metricsApiPort,
        serviceName: "conveyor-operator-metrics",
      });
      await waitForExternalMetrics(cp);
      say("operator running; external.metrics.k8s.io served through the aggregation layer");
    }

    await cp.kubectl("create", "secret", "generic", "demo-db", `--from-literal=url=${pg.url}`);
    // containers: the handler directory and the execution log are hostPath volumes of the pods
    const execDir = join(dir, "out");
    const handler = containers ? "/handlers/recordingHandler.js" : RECORDING_HANDLER.slice("module:".length);
    const mounts = containers ? hostPathMounts(execDir) : {};
    for (const p of POOLS) {
      const template = { env: [{ name: "LOG_LEVEL", value: "warn" }], ...mounts };
      const mode = containers ? ("direct" as const) : undefined;
      await cp.apply(
        JSON.stringify(workerPoolManifest(p, { redisUrl: redisServer.url, handler, template, mode })),
      );
    }
    say(`WorkerPools ${POOLS.map((p) => p.name).join(" → ")} applied (min 0, max 6 replicas, 8 slots each)`);

    runner = new PodRunner(cp.kubeConfig(), {
      namespace: NS,
      labelSelector: "conveyor.dev/workerpool",
      dir,
      extraEnv: { EXEC_LOG: containers ? "/out/executions.ndjson" : join(dir, "executions.ndjson") },
      runtime: opts.runtime,
      onEvent: (line) => say(`  ${line}`),
    });
    runner.start();

    await waitForPoolsReconciled(cp, say);
    const started = Date.now();
    await enqueueBurst(redis, opts);
    const admin = new QueueAdmin(redis);
    const progress = poolProgress(cp, admin, started, say);
    await pollUntil(
      "all jobs through both stages and both pools back at zero",
      async () => {
        const { atZero } = await progress.poll();
        const done = (await admin.counts(POOLS[1].queue)).completed >= opts.jobs;
        // (a deleted pod's worker may still be draining: wait until every process has exited)
        return done && atZero && runner!.alive.length === 0;
      },
      { timeoutMs: opts.timeoutMs ?? 15 * 60_000, intervalMs: 1000 },
    );
    const seconds = (Date.now() - started) / 1000;
    say(`all ${opts.jobs} jobs through both stages; both pools back at zero after ${seconds.toFixed(0)}s`);

    // Every pod's worker process has exited by now; collect what happened.
    const executionLog = join(containers ? execDir : dir, "executions.ndjson");
    const outcome = await collectOutcome(cp, admin, pg, {
      executionLog,
      maxReplicas: progress.maxReplicas,
      jobs: opts.jobs,
    });
    return {
      jobs: opts.jobs,
      seconds,
      ...outcome,
      workerExitCodes: runner.history.map((h) => h.exitCode ?? "running"),
      podsRun: runner.history.length,
    };
  } finally {
    say("stopping everything this run started…");
    await runner?.stop();
    if (operator) await stopProcess(operator, 10_000);
    await operatorRunner?.stop();
    redis?.disconnect();
    await redisServer?.stop();
    await pg?.stop();
    await cp?.stop();
    if (process.env.CONVEYOR_KEEP_TMP) say(`logs kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}
