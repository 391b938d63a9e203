// `conveyor operator`: wires configuration, the Kubernetes client, leader election, the
// WorkerPool controller, the external metrics API and the operator's own /metrics together,
// and shuts them down in order on SIGTERM (a leader releases its Lease so a standby takes over
// at once).
import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import { startTracing } from "../lib/telemetry.ts";
import { createLogger } from "../lib/logger.ts";
import { OptionError } from "../lib/options.ts";
import { OPERATOR_USAGE, loadOperatorConfig, type OperatorConfig } from "./config.ts";
import { RESOURCES, resourcePath } from "./apis/coordinates.ts";
import { WorkerPoolController } from "./controllers/workerpoolController.ts";
import { apiMessage, KubeClient } from "./kube/client.ts";
import { KubeConfigError, loadKubeConfig, type KubeCredentials } from "./kube/kubeConfig.ts";
import { Manager, StartError } from "./kube/manager.ts";
import { createOperatorMetrics, type OperatorMetrics } from "./metrics.ts";
import { MetricsApiServer, type ClientPolicy } from "./metricsapi/server.ts";
import { selfSignedCert } from "./metricsapi/selfsigned.ts";
import { ServingCertificate } from "./metricsapi/servingCertificate.ts";

export { OPERATOR_USAGE };

/** How often a serving certificate from files is re-read (cert-manager rotation, kubelet's Secret refresh ≈ 1 min). */
const CERT_RELOAD_MS = 30_000;

/**
 * Who may call the external metrics API: the front proxy (its CA and allowed names), any client
 * (--metrics-api-client-ca=none), or — when no CA can be found — nobody.
 */
async function metricsApiClients(
  cfg: OperatorConfig,
  client: KubeClient,
  log: Logger,
): Promise<ClientPolicy> {
  if (cfg.metricsApiClientCA === "none") return { kind: "any" };
  if (cfg.metricsApiClientCA !== "auto")
    return {
      kind: "front-proxy",
      ca: readFileSync(cfg.metricsApiClientCA, "utf8"),
      allowedNames: cfg.metricsApiAllowedNames,
    };
  const source = "kube-system/extension-apiserver-authentication";
  let why: string;
  try {
    const cm = await client.get<{ data?: Record<string, string> }>(
      resourcePath(RESOURCES.configMaps, {
        namespace: "kube-system",
        name: "extension-apiserver-authentication",
      }),
    );
    const ca = cm?.data?.["requestheader-client-ca-file"];
    if (ca) {
      const names = cm?.data?.["requestheader-allowed-names"];
      return { kind: "front-proxy", ca, allowedNames: names ? (JSON.parse(names) as string[]) : [] };
    }
    why = `${source} has no requestheader-client-ca-file`;
  } catch (err) {
    why = `cannot read ${source}: ${apiMessage(err)}`;
  }
  log.error(
    { reason: why },
    "no front-proxy client CA known: the external metrics API refuses every client (give --metrics-api-client-ca FILE, or none to accept any)",
  );
  return { kind: "refuse", why: `${why}; the operator refuses every client (--metrics-api-client-ca)` };
}

/**
 * Runs the operator until SIGTERM/SIGINT (or `signal`); resolves with the exit code.
 * Bad flags: 2, with a message naming the flag.
 */
export async function runOperator(argv: string[], opts: { signal?: AbortSignal } = {}): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(`${OPERATOR_USAGE}\n`);
    return 0;
  }
  const cfg = parseConfig(argv);
  if (typeof cfg === "number") return cfg;
  const log = createLogger(cfg.logLevel, { component: "conveyor-operator", identity: cfg.identity });
  // Reconcile and scale-decision spans when the OTEL_* variables ask for export.
  const tracing = await startTracing({ serviceName: "conveyor-operator", warn: (m) => log.warn(m) });
  let kc: KubeCredentials;
  try {
    kc = await loadKubeConfig({ file: cfg.kubeconfig, context: cfg.context });
  } catch (err) {
    // KubeConfigError names the file and field; client-node's (exec plugins, auth providers) may not.
    const where = err instanceof KubeConfigError ? "" : "--kubeconfig / KUBECONFIG: ";
    process.stderr.write(`conveyor operator: ${where}${(err as Error).message}\n`);
    return 2;
  }

  const metrics = createOperatorMetrics();
  const base = new KubeClient(kc, { metrics, userAgent: `conveyor-operator/${cfg.identity}` });
  const manager = newManager(cfg, base, log, metrics);
  const controller = new WorkerPoolController({
    client: manager.client,
    namespaces: cfg.namespaces,
    defaultImage: cfg.workerImage,
    defaultPythonImage: cfg.pythonWorkerImage,
    workerOutboxMaxBytes: cfg.workerOutboxMaxBytes,
    identity: cfg.identity,
    isLeader: () => manager.isLeader(),
    log,
    metrics,
    workers: cfg.workers,
    relistMs: cfg.relistMs,
    secretAccess: { restricted: cfg.restrictSecretAccess, ownNamespace: cfg.ownNamespace },
  });
  manager.addController(controller);
  const api = cfg.metricsApi ? await addMetricsApi(cfg, manager, controller, base, log, metrics) : {};
  if ("exitCode" in api) return api.exitCode;

  try {
    await manager.start();
  } catch (err) {
    if (!(err instanceof StartError)) throw err;
    api.servingCert?.stop();
    log.fatal({ err: (err.cause as Error)?.message ?? String(err.cause) }, err.what);
    return 1;
  }
  log.info(
    {
      namespaces: cfg.namespaces.length ? cfg.namespaces : "all",
      workerImage: cfg.workerImage,
      pythonWorkerImage: cfg.pythonWorkerImage,
      leaderElection: cfg.leaderElect,
      metricsApi: cfg.metricsApi,
      restrictSecretAccess: cfg.restrictSecretAccess,
    },
    "conveyor operator starting",
  );
  await untilStopped(log, opts.signal);
  await manager.stop();
  await tracing?.shutdown();
  log.info("stopped");
  return 0;
}

/** The configuration from flags and environment, or the exit code of bad flags (2, after a message). */
function parseConfig(argv: string[]): OperatorConfig | number {
  try {
    return loadOperatorConfig(argv);
  } catch (err) {
    if (err instanceof OptionError) {
      process.stderr.write(`conveyor operator: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

function newManager(cfg: OperatorConfig, base: KubeClient, log: Logger, metrics: OperatorMetrics): Manager {
  return new Manager({
    baseClient: base,
    log,
    metrics,
    metricsAddress: cfg.metricsAddress,
    metricsPort: cfg.metricsPort,
    leaderElection: cfg.leaderElect
      ? {
          namespace: cfg.leaderElectionNamespace,
          name: cfg.leaderElectionId,
          identity: cfg.identity,
          leaseDurationMs: cfg.leaseDurationMs,
          renewDeadlineMs: cfg.renewDeadlineMs,
          retryPeriodMs: cfg.retryPeriodMs,
        }
      : undefined,
  });
}

/**
 * The external metrics API as one of the manager's servers, with its serving certificate (from
 * files, re-read on rotation, or self-signed); exit code 1 when the files are not usable.
 */
async function addMetricsApi(
  cfg: OperatorConfig,
  manager: Manager,
  controller: WorkerPoolController,
  base: KubeClient,
  log: Logger,
  metrics: OperatorMetrics,
): Promise<{ servingCert?: ServingCertificate } | { exitCode: number }> {
  let servingCert: ServingCertificate | undefined;
  let cert: string;
  let key: string;
  if (cfg.metricsApiCert && cfg.metricsApiKey) {
    try {
      servingCert = new ServingCertificate(cfg.metricsApiCert, cfg.metricsApiKey, log);
    } catch (err) {
      log.fatal(
        { err: (err as Error).message },
        "--metrics-api-cert / --metrics-api-key: not a usable certificate and key",
      );
      return { exitCode: 1 };
    }
    ({ cert, key } = servingCert.pair);
  } else {
    const hosts = cfg.metricsApiHosts.length > 0 ? cfg.metricsApiHosts : ["localhost", "127.0.0.1"];
    ({ cert, key } = selfSignedCert("conveyor-operator", hosts));
    log.info(
      { hosts },
      "external metrics API uses a self-signed certificate (APIService: insecureSkipTLSVerify, or give --metrics-api-cert)",
    );
  }
  const metricsApi = new MetricsApiServer({
    host: cfg.metricsApiAddress,
    port: cfg.metricsApiPort,
    cert,
    key,
    clients: await metricsApiClients(cfg, base, log),
    lookup: (ns, name) => controller.metricLookup(ns, name),
    log,
    metrics,
  });
  servingCert?.watch(CERT_RELOAD_MS, (pair) => metricsApi.setCertificate(pair));
  manager.addServer(`cannot listen on --metrics-api-port ${cfg.metricsApiPort}`, {
    start: () => metricsApi.start(),
    stop: async () => {
      servingCert?.stop();
      await metricsApi.stop();
    },
  });
  return { servingCert };
}

/** Resolves on SIGTERM, SIGINT or `signal`'s abort. */
async function untilStopped(log: Logger, signal: AbortSignal | undefined): Promise<void> {
  let stopRequested: () => void = () => {};
  const stopped = new Promise<void>((resolve) => (stopRequested = resolve));
  const onSignal = (sig: NodeJS.Signals) => {
    log.info({ signal: sig }, "stopping");
    stopRequested();
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  signal?.addEventListener("abort", () => stopRequested(), { once: true });
  await stopped;
  process.off("SIGTERM", onSignal);
  process.off("SIGINT", onSignal);
}

if (import.meta.main) {
  process.exitCode = await runOperator(process.argv.slice(2));
}
