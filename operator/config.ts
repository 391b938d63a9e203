// Operator configuration from flags and environment, validated at start: a bad value stops
// the operator with a message naming the flag (and its variable), never a half-running one.
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { DEFAULT_WORKER_IMAGE_REPO } from "./controllers/deployment.ts";

export interface OperatorConfig {
  kubeconfig?: string;
  context?: string;
  namespaces: string[];
  workerImage: string;
  metricsAddress: string;
  metricsPort: number;
  metricsApi: boolean;
  metricsApiAddress: string;
  metricsApiPort: number;
  metricsApiCert?: string;
  metricsApiKey?: string;
  /** "auto" (from kube-system/extension-apiserver-authentication), "none", or a PEM file. */
  metricsApiClientCA: string;
  metricsApiHosts: string[];
  leaderElect: boolean;
  leaderElectionNamespace: string;
  leaderElectionId: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  workers: number;
  relistMs: number;
  logLevel: string;
}

export class OperatorConfigError extends Error {
  override name = "OperatorConfigError";
}

const SOURCES = {
  kubeconfig: "KUBECONFIG",
  context: "CONVEYOR_KUBE_CONTEXT",
  namespaces: "CONVEYOR_WATCH_NAMESPACES",
  "worker-image": "CONVEYOR_WORKER_IMAGE",
  "metrics-address": "CONVEYOR_METRICS_ADDRESS",
  "metrics-port": "CONVEYOR_METRICS_PORT",
  "metrics-api": "CONVEYOR_METRICS_API",
  "metrics-api-address": "CONVEYOR_METRICS_API_ADDRESS",
  "metrics-api-port": "CONVEYOR_METRICS_API_PORT",
  "metrics-api-cert": "CONVEYOR_METRICS_API_CERT",
  "metrics-api-key": "CONVEYOR_METRICS_API_KEY",
  "metrics-api-client-ca": "CONVEYOR_METRICS_API_CLIENT_CA",
  "metrics-api-hosts": "CONVEYOR_METRICS_API_HOSTS",
  "leader-elect": "CONVEYOR_LEADER_ELECT",
  "leader-election-namespace": "CONVEYOR_LEADER_ELECTION_NAMESPACE",
  "leader-election-id": "CONVEYOR_LEADER_ELECTION_ID",
  identity: "POD_NAME",
  "lease-duration": "CONVEYOR_LEASE_DURATION_SECONDS",
  "renew-deadline": "CONVEYOR_RENEW_DEADLINE_SECONDS",
  "retry-period": "CONVEYOR_RETRY_PERIOD_SECONDS",
  workers: "CONVEYOR_RECONCILE_WORKERS",
  "relist-seconds": "CONVEYOR_RELIST_SECONDS",
  "log-level": "LOG_LEVEL",
} as const;
type Option = keyof typeof SOURCES;

export const OPERATOR_USAGE = `usage: conveyor operator [options]

Runs the WorkerPool operator. Every flag can also be given by the environment variable shown.

  --kubeconfig PATH                 KUBECONFIG        default: in-cluster, else ~/.kube/config
  --context NAME                    CONVEYOR_KUBE_CONTEXT
  --namespaces a,b                  CONVEYOR_WATCH_NAMESPACES  namespaces to watch (default: all)
  --worker-image IMAGE              CONVEYOR_WORKER_IMAGE      default ${DEFAULT_WORKER_IMAGE_REPO}:<version>
  --metrics-address ADDR            CONVEYOR_METRICS_ADDRESS   Prometheus /metrics, /healthz, /readyz (default 0.0.0.0)
  --metrics-port N                  CONVEYOR_METRICS_PORT      (default 8080; 0 = any free port)
  --metrics-api true|false          CONVEYOR_METRICS_API       serve external.metrics.k8s.io (default true;
                                                               false for clusters whose external metrics API is
                                                               taken: use scaling.mode=direct)
  --metrics-api-address ADDR        CONVEYOR_METRICS_API_ADDRESS  (default 0.0.0.0)
  --metrics-api-port N              CONVEYOR_METRICS_API_PORT     (default 6443)
  --metrics-api-cert FILE           CONVEYOR_METRICS_API_CERT     serving certificate (PEM); default: self-signed
  --metrics-api-key FILE            CONVEYOR_METRICS_API_KEY
  --metrics-api-client-ca auto|none|FILE  CONVEYOR_METRICS_API_CLIENT_CA  who may call it: the API server's front
                                                               proxy (auto: read kube-system/extension-apiserver-authentication)
  --metrics-api-hosts a,b           CONVEYOR_METRICS_API_HOSTS    names/IPs of the self-signed certificate
  --leader-elect true|false         CONVEYOR_LEADER_ELECT      (default true)
  --leader-election-namespace NS    CONVEYOR_LEADER_ELECTION_NAMESPACE  (default: own namespace, else "default")
  --leader-election-id NAME         CONVEYOR_LEADER_ELECTION_ID  Lease name (default conveyor-operator)
  --identity ID                     POD_NAME          this replica's name in the Lease (default host + random)
  --lease-duration S                CONVEYOR_LEASE_DURATION_SECONDS   (default 15)
  --renew-deadline S                CONVEYOR_RENEW_DEADLINE_SECONDS   (default 10)
  --retry-period S                  CONVEYOR_RETRY_PERIOD_SECONDS     (default 2)
  --workers N                       CONVEYOR_RECONCILE_WORKERS   concurrent reconciles (default 4)
  --relist-seconds S                CONVEYOR_RELIST_SECONDS      full relist period of the informers (default 600)
  --log-level LEVEL                 LOG_LEVEL         trace|debug|info|warn|error (default info)`;

function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version?: string };
    return pkg.version ?? "latest";
  } catch {
    return "latest";
  }
}

function ownNamespace(): string | undefined {
  try {
    return readFileSync("/var/run/secrets/kubernetes.io/serviceaccount/namespace", "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

export function loadOperatorConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): OperatorConfig {
  const options = Object.fromEntries(Object.keys(SOURCES).map((k) => [k, { type: "string" as const }])) as Record<Option, { type: "string" }>;
  let values: Partial<Record<Option, string>>;
  try {
    const parsed = parseArgs({ args: argv, options, strict: true, allowPositionals: false });
    values = parsed.values as Partial<Record<Option, string>>;
  } catch (err) {
    throw new OperatorConfigError(`${(err as Error).message}\n${OPERATOR_USAGE}`);
  }
  const raw = (opt: Option): string | undefined => {
    const v = values[opt] ?? env[SOURCES[opt]];
    return v === undefined || v === "" ? undefined : v;
  };
  const name = (opt: Option) => `--${opt} / ${SOURCES[opt]}`;
  const int = (opt: Option, def: number, min: number, max: number): number => {
    const v = raw(opt);
    if (v === undefined) return def;
    const n = Number(v);
    if (!/^\d+$/.test(v.trim()) || n < min || n > max) throw new OperatorConfigError(`${name(opt)}: expected a whole number ${min}..${max}, got ${JSON.stringify(v)}`);
    return n;
  };
  const bool = (opt: Option, def: boolean): boolean => {
    const v = raw(opt);
    if (v === undefined) return def;
    if (/^(true|1|yes|on)$/i.test(v)) return true;
    if (/^(false|0|no|off)$/i.test(v)) return false;
    throw new OperatorConfigError(`${name(opt)}: expected true or false, got ${JSON.stringify(v)}`);
  };
  const list = (opt: Option): string[] =>
    (raw(opt) ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  const file = (opt: Option): string | undefined => {
    const v = raw(opt);
    if (v === undefined) return undefined;
    try {
      readFileSync(v);
    } catch (err) {
      throw new OperatorConfigError(`${name(opt)}: cannot read ${v}: ${(err as Error).message}`);
    }
    return v;
  };

  const namespaces = list("namespaces");
  for (const ns of namespaces) {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(ns)) throw new OperatorConfigError(`${name("namespaces")}: ${JSON.stringify(ns)} is not a namespace name`);
  }
  const logLevel = raw("log-level") ?? "info";
  if (!["trace", "debug", "info", "warn", "error", "fatal", "silent"].includes(logLevel)) {
    throw new OperatorConfigError(`${name("log-level")}: unknown level ${JSON.stringify(logLevel)}`);
  }
  const metricsApiCert = file("metrics-api-cert");
  const metricsApiKey = file("metrics-api-key");
  if (!!metricsApiCert !== !!metricsApiKey) {
    throw new OperatorConfigError(`${name("metrics-api-cert")} and ${name("metrics-api-key")} go together`);
  }
  const clientCA = raw("metrics-api-client-ca") ?? "auto";
  if (clientCA !== "auto" && clientCA !== "none") file("metrics-api-client-ca");
  const leaseDuration = int("lease-duration", 15, 2, 3600);
  const renewDeadline = int("renew-deadline", 10, 1, 3600);
  const retryPeriod = int("retry-period", 2, 1, 600);
  if (renewDeadline >= leaseDuration) throw new OperatorConfigError(`${name("renew-deadline")} (${renewDeadline}) must be less than ${name("lease-duration")} (${leaseDuration})`);
  if (retryPeriod >= renewDeadline) throw new OperatorConfigError(`${name("retry-period")} (${retryPeriod}) must be less than ${name("renew-deadline")} (${renewDeadline})`);
  const kubeconfig = file("kubeconfig");
  const electionId = raw("leader-election-id") ?? "conveyor-operator";
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(electionId)) throw new OperatorConfigError(`${name("leader-election-id")}: ${JSON.stringify(electionId)} is not a valid Lease name`);

  return {
    kubeconfig,
    context: raw("context"),
    namespaces,
    workerImage: raw("worker-image") ?? `${DEFAULT_WORKER_IMAGE_REPO}:${packageVersion()}`,
    metricsAddress: raw("metrics-address") ?? "0.0.0.0",
    metricsPort: int("metrics-port", 8080, 0, 65535),
    metricsApi: bool("metrics-api", true),
    metricsApiAddress: raw("metrics-api-address") ?? "0.0.0.0",
    metricsApiPort: int("metrics-api-port", 6443, 0, 65535),
    metricsApiCert,
    metricsApiKey,
    metricsApiClientCA: clientCA,
    metricsApiHosts: list("metrics-api-hosts"),
    leaderElect: bool("leader-elect", true),
    leaderElectionNamespace: raw("leader-election-namespace") ?? ownNamespace() ?? env.POD_NAMESPACE ?? "default",
    leaderElectionId: electionId,
    identity: raw("identity") ?? `${hostname()}-${randomBytes(4).toString("hex")}`,
    leaseDurationMs: leaseDuration * 1000,
    renewDeadlineMs: renewDeadline * 1000,
    retryPeriodMs: retryPeriod * 1000,
    workers: int("workers", 4, 1, 64),
    relistMs: int("relist-seconds", 600, 5, 86400) * 1000,
    logLevel,
  };
}
