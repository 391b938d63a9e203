// `conveyor operator` as a child process against a test control plane (test/support/controlplane.ts):
// its log file, its /metrics, /healthz and /readyz port. Flags as the cluster tests use them.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pollUntil } from "./poll.ts";
import { freePort } from "./ports.ts";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import type { WorkerPool, WorkerPoolInput, WorkerPoolSpecInput } from "../../operator/apis/v1alpha1/types.ts";
import type { Deployment } from "../../operator/controllers/objects.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import { connectRedis, type RedisClient } from "../../queue/index.ts";
import { ControlPlane, type ControlPlaneOptions } from "./controlplane.ts";
import { type PodRunner, startPoolPodRunner } from "./podRunner.ts";
import { startProcess, stopProcess, type Started } from "./processes.ts";
import { RedisServer } from "./redis.ts";
import { CONVEYOR, NODE, type Release } from "./workers.ts";

export interface OperatorProcess {
  name: string;
  proc: Started;
  /** The process group leader's pid at start (a restart would change it). */
  pid: number;
  /** Where /metrics /healthz /readyz listen (the operator picks a free port and logs it). */
  metricsPort: number;
  /** stdout + stderr of the operator. */
  log: string;
}

/** Starts the operator (identity `name`, leader election in `default`, debug logs) and waits for /readyz. */
export async function startOperator(
  cp: ControlPlane,
  name: string,
  args: string[] = [],
  /** release: which release's operator runs (default this one; test/support/releases.ts). */
  opts: { timeoutMs?: number; env?: Record<string, string>; release?: Release } = {},
): Promise<OperatorProcess> {
  const log = join(cp.dir, `operator-${name}.log`);
  // the log is appended to: a restart under the same name reads only its own lines
  const logStart = existsSync(log) ? statSync(log).size : 0;
  const proc = startProcess(
    opts.release?.node ?? NODE,
    [
      opts.release?.conveyor ?? CONVEYOR,
      "operator",
      `--kubeconfig=${cp.kubeconfigPath}`,
      `--identity=${name}`,
      "--metrics-address=127.0.0.1",
      // any free port, read back from the log: a port picked here could be taken before the operator listens
      "--metrics-port=0",
      "--leader-election-namespace=default",
      "--worker-image=conveyor-worker:test",
      "--log-level=debug",
      ...args,
    ],
    { logFile: log, env: { ...process.env, POD_NAME: "", ...opts.env } },
  );
  const op: OperatorProcess = { name, proc, pid: proc.child.pid!, metricsPort: 0, log };
  await pollUntil(
    `operator ${name} /readyz`,
    async () => {
      if (proc.child.exitCode !== null)
        throw new Error(`operator ${name} exited: ${operatorLog(op).slice(-2000)}`);
      op.metricsPort ||= servingPort(readFileSync(log).subarray(logStart).toString("utf8"));
      return op.metricsPort > 0 && (await fetch(`http://127.0.0.1:${op.metricsPort}/readyz`)).ok;
    },
    { timeoutMs: opts.timeoutMs ?? 240_000 },
  );
  return op;
}

/**
 * startOperator serving external.metrics.k8s.io to the control plane's HPAs: a serving
 * certificate on the routable address (the aggregator dials the address but checks the
 * certificate against <service>.<namespace>.svc), then the APIService pointing at it.
 */
export async function startMetricsApiOperator(
  cp: ControlPlane,
  name: string,
  args: string[] = [],
): Promise<OperatorProcess> {
  const routable = await cp.routableAddress();
  const serviceName = "conveyor-operator-metrics";
  const cert = await cp.issueServingCert(serviceName, {
    ips: [routable.address],
    dnsNames: [`${serviceName}.default.svc`],
  });
  const port = await freePort();
  const op = await startOperator(cp, name, [
    `--metrics-api-address=${routable.address}`,
    `--metrics-api-port=${port}`,
    `--metrics-api-cert=${cert.certFile}`,
    `--metrics-api-key=${cert.keyFile}`,
    "--metrics-api-client-ca=auto",
    ...args,
  ]);
  await cp.registerAPIService({
    group: "external.metrics.k8s.io",
    version: "v1beta1",
    address: routable.address,
    port,
    serviceName,
  });
  return op;
}

/** The port of /metrics /healthz /readyz from the operator's "serving" log line; 0 before it. */
function servingPort(log: string): number {
  for (const line of log.split("\n")) {
    if (!line.includes('"serving /metrics /healthz /readyz"')) continue;
    try {
      return (JSON.parse(line) as { port?: number }).port ?? 0;
    } catch {
      return 0; // the line is still being written
    }
  }
  return 0;
}

export function operatorLog(op: OperatorProcess): string {
  try {
    return readFileSync(op.log, "utf8");
  } catch {
    return "";
  }
}

/** The operator's /metrics text. */
export async function operatorMetricsText(op: OperatorProcess): Promise<string> {
  return (await fetch(`http://127.0.0.1:${op.metricsPort}/metrics`)).text();
}

/** The operator's /metrics as series → value. */
export async function scrapeOperator(op: OperatorProcess): Promise<Map<string, number>> {
  return parseMetrics(await operatorMetricsText(op));
}

/** Prometheus text exposition as series (name with labels) → value. */
export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

/** Sum of the series of `metric` whose label text matches `labels`. */
export function sumSeries(m: Map<string, number>, metric: string, labels: RegExp = /.*/): number {
  let n = 0;
  for (const [series, v] of m)
    if ((series === metric || series.startsWith(`${metric}{`)) && labels.test(series)) n += v;
  return n;
}

/**
 * Waits until the operator has polled a pool's backlog `n` more times and reconciled what those
 * polls enqueued (work queue empty): "nothing happened over N polls" without a guessed sleep.
 */
export async function waitForPolls(
  op: OperatorProcess,
  namespace: string,
  name: string,
  n: number,
  timeoutMs = 240_000,
): Promise<void> {
  const series = new RegExp(`namespace="${namespace}",workerpool="${name}"`);
  const polls = async () =>
    sumSeries(await scrapeOperator(op), "conveyor_operator_backlog_polls_total", series);
  const target = (await polls()) + n;
  await pollUntil(`${n} more backlog polls of ${namespace}/${name}`, async () => (await polls()) >= target, {
    timeoutMs,
  });
  await pollUntil(
    "the operator's work queue drained",
    async () => sumSeries(await scrapeOperator(op), "conveyor_operator_workqueue_depth") === 0,
    { timeoutMs },
  );
}

export async function isLeader(op: OperatorProcess): Promise<boolean> {
  return (await scrapeOperator(op)).get("conveyor_operator_leader") === 1;
}

/** Alive: same process, not exited, /healthz answers 200. */
export async function operatorAlive(op: OperatorProcess): Promise<boolean> {
  if (op.proc.child.exitCode !== null || op.proc.child.signalCode !== null) return false;
  if (op.proc.child.pid !== op.pid) return false;
  try {
    return (await fetch(`http://127.0.0.1:${op.metricsPort}/healthz`)).ok;
  } catch {
    return false;
  }
}

/** A WorkerPool on queue `<name>/work` of `redisUrl`, the kwok pods' handler path, `spec` on top. */
export function workerPoolManifest(
  name: string,
  redisUrl: string,
  spec: Partial<WorkerPoolSpecInput> = {},
  namespace = "default",
): WorkerPoolInput {
  return {
    apiVersion: "conveyor.dev/v1alpha1",
    kind: "WorkerPool",
    metadata: { name, namespace },
    spec: {
      queue: `${name}/work`,
      redis: { url: redisUrl },
      handler: { module: "/app/handler.js" },
      ...spec,
    } as WorkerPoolSpecInput,
  };
}

export interface PoolEvent {
  reason: string;
  message: string;
  type: string;
}

/** The Events recorded about one WorkerPool. */
export async function workerPoolEvents(k: KubeClient, namespace: string, name: string): Promise<PoolEvent[]> {
  const list = await k.list<PoolEvent>(resourcePath(RESOURCES.events, { namespace }), {
    fieldSelector: `involvedObject.name=${name},involvedObject.kind=WorkerPool`,
  });
  return list.items;
}

/**
 * What the WorkerPool tests share: a control plane with the CRD, a Redis and one operator that
 * leads (no external metrics API: pools in direct mode write their scale), with the reads and the
 * apply the tests make of pools.
 */
export interface PoolHarness {
  cp: ControlPlane;
  k: KubeClient;
  redis: RedisServer;
  r: RedisClient;
  /** The operator that leads (a new one after `restartOperator`). */
  op: OperatorProcess;
  /** Real worker processes for the pools' pods (`opts.pods`); undefined without. */
  runner?: PodRunner;
  /** A directory of the harness's own, removed at stop (unless CONVEYOR_KEEP_TMP=1). */
  dir: string;
  /** Where the pods' recording handler logs its executions (`opts.pods.executionLog`). */
  executionLog: string;
  /** Stops the operator and starts another as the first was started; resolves once it leads. */
  restartOperator(): Promise<OperatorProcess>;
  getPool(name: string): Promise<WorkerPool | null>;
  /** The pool's Deployment's spec.replicas (undefined: no Deployment yet). */
  replicas(name: string): Promise<number | undefined>;
  /** `kubectl apply` of an object; fails the test with kubectl's output when refused. */
  apply(obj: unknown): Promise<void>;
  /** Stops what started, the operator first. */
  stop(): Promise<void>;
}

export interface PoolHarnessOptions {
  /** Runs once the control plane and Redis are up and before the operator starts (e.g. Secrets it reads). */
  beforeOperator?: (cp: ControlPlane) => Promise<void>;
  /** The control plane (default: the API server alone, no controllers). */
  controlPlane?: ControlPlaneOptions;
  /** Starts the operator (default: `conveyor operator --metrics-api=false` with identity `name`). */
  operator?: (cp: ControlPlane, name: string) => Promise<OperatorProcess>;
  /**
   * A PodRunner running a real `conveyor worker` for every pod of a WorkerPool (the control plane
   * needs its ReplicaSet controller and scheduler); `executionLog`: the recording handler logs
   * every execution to the harness's `executionLog`.
   */
  pods?: { executionLog?: boolean };
}

/** Starts a PoolHarness whose operator has identity `name`. */
export async function startPoolHarness(name: string, opts: PoolHarnessOptions = {}): Promise<PoolHarness> {
  const dir = mkdtempSync(join(tmpdir(), `cvy-${name}-`));
  const executionLog = join(dir, "executions.ndjson");
  const startOp =
    opts.operator ?? ((cp: ControlPlane, id: string) => startOperator(cp, id, ["--metrics-api=false"]));
  const started: Partial<Pick<PoolHarness, "cp" | "redis" | "r" | "op" | "runner">> = {};
  const stop = async () => {
    await started.runner?.stop();
    if (started.op) await stopProcess(started.op.proc, 10_000);
    started.r?.disconnect();
    await started.redis?.stop();
    await started.cp?.stop();
    if (process.env.CONVEYOR_KEEP_TMP !== "1") rmSync(dir, { recursive: true, force: true });
  };
  try {
    const cp = (started.cp = await ControlPlane.start(opts.controlPlane ?? { controllers: false }));
    const k = new KubeClient(cp.kubeConfig());
    const root = join(import.meta.dirname, "..", "..");
    await cp.kubectl("apply", "--server-side", "-f", join(root, "crds", "conveyor.dev_workerpools.yaml"));
    await cp.waitForCrd("workerpools.conveyor.dev");
    const redis = (started.redis = await RedisServer.start());
    const r = (started.r = connectRedis(redis.url));
    await opts.beforeOperator?.(cp);
    const leads = async () => {
      const op = (started.op = await startOp(cp, name));
      await pollUntil("the operator leads", () => isLeader(op), { timeoutMs: 240_000 });
      return op;
    };
    await leads();
    if (opts.pods) {
      started.runner = startPoolPodRunner(
        cp.kubeConfig(),
        dir,
        opts.pods.executionLog ? executionLog : undefined,
      );
    }
    const h: PoolHarness = {
      cp,
      k,
      redis,
      r,
      get op() {
        return started.op!;
      },
      runner: started.runner,
      dir,
      executionLog,
      restartOperator: async () => {
        await stopProcess(started.op!.proc, 10_000);
        started.op = undefined;
        return leads();
      },
      getPool: (pool) =>
        k.get<WorkerPool>(resourcePath(RESOURCES.workerPools, { namespace: "default", name: pool })),
      replicas: async (pool) =>
        (await k.get<Deployment>(resourcePath(RESOURCES.deployments, { namespace: "default", name: pool })))
          ?.spec?.replicas,
      apply: async (obj) => {
        const res = await cp.run("kubectl", [`--kubeconfig=${cp.kubeconfigPath}`, "apply", "-f", "-"], {
          input: JSON.stringify(obj),
          check: false,
        });
        assert.equal(res.code, 0, `${res.stdout}${res.stderr}`);
      },
      stop,
    };
    return h;
  } catch (err) {
    await stop();
    throw err;
  }
}
