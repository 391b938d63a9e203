// Operator configuration from flags and environment, validated at start: a bad value stops
// the operator with a message naming the flag (and its variable), never a half-running one.
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { DURATION_HELP } from "../lib/duration.ts";
import { OptionError, readOptions } from "../lib/options.ts";
import { packageVersion } from "../lib/packageVersion.ts";
import { DEFAULT_WORKER_IMAGE_REPO } from "./controllers/deployment.ts";
import { SERVICE_ACCOUNT } from "./kube/kubeConfig.ts";

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
  /** Common names the front proxy's certificate may have with a CA file (auto reads them; none = any). */
  metricsApiAllowedNames: string[];
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
  /** Use only Secrets labelled conveyor.dev/secret-access=true or in `ownNamespace`. */
  restrictSecretAccess: boolean;
  /** CONVEYOR_OUTBOX_MAX_BYTES of the workers of pools with job records; undefined: the worker's default. */
  workerOutboxMaxBytes?: number;
  /** The namespace the operator runs in (service account, else POD_NAMESPACE). */
  ownNamespace?: string;
  logLevel: string;
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
  "metrics-api-allowed-names": "CONVEYOR_METRICS_API_ALLOWED_NAMES",
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
  "restrict-secret-access": "CONVEYOR_RESTRICT_SECRET_ACCESS",
  "worker-outbox-max-bytes": "CONVEYOR_WORKER_OUTBOX_MAX_BYTES",
  "log-level": "LOG_LEVEL",
} as const;

export const OPERATOR_USAGE = `usage: conveyor operator [options]

Runs the WorkerPool operator. Every flag can also be given by the environment variable shown.

  --kubeconfig PATH                 KUBECONFIG        default: ~/.kube/config, else in-cluster
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
                                                               proxy (auto: read kube-system/extension-apiserver-authentication;
                                                               no CA found = refuse every client; none = accept any)
  --metrics-api-allowed-names a,b   CONVEYOR_METRICS_API_ALLOWED_NAMES  front-proxy certificate names accepted
                                                               with a CA FILE (default: any the CA signed)
  --metrics-api-hosts a,b           CONVEYOR_METRICS_API_HOSTS    names/IPs of the self-signed certificate
  --leader-elect true|false         CONVEYOR_LEADER_ELECT      (default true)
  --leader-election-namespace NS    CONVEYOR_LEADER_ELECTION_NAMESPACE  (default: own namespace, else "default")
  --leader-election-id NAME         CONVEYOR_LEADER_ELECTION_ID  Lease name (default conveyor-operator)
  --identity ID                     POD_NAME          this replica's name in the Lease (default host + random)
  --lease-duration D                CONVEYOR_LEASE_DURATION_SECONDS   (default 15s)
  --renew-deadline D                CONVEYOR_RENEW_DEADLINE_SECONDS   (default 10s)
  --retry-period D                  CONVEYOR_RETRY_PERIOD_SECONDS     (default 2s)
  --workers N                       CONVEYOR_RECONCILE_WORKERS   concurrent reconciles (default 4)
  --relist-seconds D                CONVEYOR_RELIST_SECONDS      resync period: every pool re-checked from the cache
                                                               (default 10m; a relist only after a watch error)
  --restrict-secret-access true|false  CONVEYOR_RESTRICT_SECRET_ACCESS  read only Secrets labelled
                                                               conveyor.dev/secret-access=true or in the operator's
                                                               own namespace (default false; the chart sets true)
  --worker-outbox-max-bytes N       CONVEYOR_WORKER_OUTBOX_MAX_BYTES  the outbox byte budget given to the workers
                                                               of pools with job records (CONVEYOR_OUTBOX_MAX_BYTES;
                                                               default: the worker's, 256 MiB; at least 1048576)
  --log-level LEVEL                 LOG_LEVEL         trace|debug|info|warn|error (default info)
Booleans: --flag alone means true. ${DURATION_HELP}`;

/** The worker image of this release: tagged with Conveyor's version (lib/packageVersion), else latest. */
function workerImageTag(): string {
  const version = packageVersion();
  return version === "unknown" ? "latest" : version;
}

function ownNamespace(): string | undefined {
  try {
    return readFileSync(`${SERVICE_ACCOUNT}/namespace`, "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

export function loadOperatorConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): OperatorConfig {
  const o = readOptions(argv, env, SOURCES, OPERATOR_USAGE, [
    "metrics-api",
    "leader-elect",
    "restrict-secret-access",
  ]);
  const { name } = o;

  const namespaces = o.list("namespaces");
  for (const ns of namespaces) {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(ns))
      throw new OptionError(`${name("namespaces")}: ${JSON.stringify(ns)} is not a namespace name`);
  }
  const metricsApiCert = o.file("metrics-api-cert");
  const metricsApiKey = o.file("metrics-api-key");
  if (!!metricsApiCert !== !!metricsApiKey) {
    throw new OptionError(`${name("metrics-api-cert")} and ${name("metrics-api-key")} go together`);
  }
  const clientCA = o.raw("metrics-api-client-ca") ?? "auto";
  if (clientCA !== "auto" && clientCA !== "none") o.file("metrics-api-client-ca");
  const leaseDuration = o.duration("lease-duration", 15_000, 2000, 3600_000);
  const renewDeadline = o.duration("renew-deadline", 10_000, 1000, 3600_000);
  const retryPeriod = o.duration("retry-period", 2000, 1000, 600_000);
  if (renewDeadline >= leaseDuration)
    throw new OptionError(
      `${name("renew-deadline")} (${renewDeadline}ms) must be less than ${name("lease-duration")} (${leaseDuration}ms)`,
    );
  if (retryPeriod >= renewDeadline)
    throw new OptionError(
      `${name("retry-period")} (${retryPeriod}ms) must be less than ${name("renew-deadline")} (${renewDeadline}ms)`,
    );
  const electionId = o.raw("leader-election-id") ?? "conveyor-operator";
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(electionId))
    throw new OptionError(
      `${name("leader-election-id")}: ${JSON.stringify(electionId)} is not a valid Lease name`,
    );

  const operatorNamespace = ownNamespace() ?? env.POD_NAMESPACE;
  return {
    kubeconfig: o.raw("kubeconfig"),
    context: o.raw("context"),
    namespaces,
    workerImage: o.raw("worker-image") ?? `${DEFAULT_WORKER_IMAGE_REPO}:${workerImageTag()}`,
    metricsAddress: o.raw("metrics-address") ?? "0.0.0.0",
    metricsPort: o.int("metrics-port", 8080, 0, 65535),
    metricsApi: o.bool("metrics-api", true),
    metricsApiAddress: o.raw("metrics-api-address") ?? "0.0.0.0",
    metricsApiPort: o.int("metrics-api-port", 6443, 0, 65535),
    metricsApiCert,
    metricsApiKey,
    metricsApiClientCA: clientCA,
    metricsApiAllowedNames: o.list("metrics-api-allowed-names"),
    metricsApiHosts: o.list("metrics-api-hosts"),
    leaderElect: o.bool("leader-elect", true),
    leaderElectionNamespace: o.raw("leader-election-namespace") ?? operatorNamespace ?? "default",
    leaderElectionId: electionId,
    identity: o.raw("identity") ?? `${hostname()}-${randomBytes(4).toString("hex")}`,
    leaseDurationMs: leaseDuration,
    renewDeadlineMs: renewDeadline,
    retryPeriodMs: retryPeriod,
    workers: o.int("workers", 4, 1, 64),
    relistMs: o.duration("relist-seconds", 600_000, 5000, 86_400_000),
    restrictSecretAccess: o.bool("restrict-secret-access", false),
    workerOutboxMaxBytes:
      o.raw("worker-outbox-max-bytes") === undefined
        ? undefined
        : o.int("worker-outbox-max-bytes", 0, 1 << 20, Number.MAX_SAFE_INTEGER),
    ownNamespace: operatorNamespace,
    logLevel: o.logLevel("log-level"),
  };
}
