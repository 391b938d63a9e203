// Operator configuration from flags and environment, validated at start: a bad value stops
// the operator with a message naming the flag (and its variable), never a half-running one.
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { DURATION_HELP } from "../lib/duration.ts";
import {
  bool,
  duration,
  file,
  int,
  list,
  OptionError,
  readOptions,
  settingsHelp,
  str,
  type Settings,
} from "../lib/options.ts";
import { LOG_LEVEL_SETTING } from "../lib/settings.ts";
import { packageVersion } from "../lib/packageVersion.ts";
import { DEFAULT_WORKER_IMAGE_REPO, pythonVariant } from "./controllers/deployment.ts";
import { SERVICE_ACCOUNT } from "./kube/kubeConfig.ts";

export interface OperatorConfig {
  kubeconfig?: string;
  context?: string;
  namespaces: string[];
  workerImage: string;
  /** The image of pools with a python handler that name none. */
  pythonWorkerImage: string;
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

/** Every operator flag and its variable (lib/options.ts Setting). */
export const OPERATOR_SETTINGS = {
  kubeconfig: str(
    "KUBECONFIG",
    { arg: "PATH", defaultHelp: "~/.kube/config, else in-cluster" },
    "the cluster to manage",
  ),
  context: str("CONVEYOR_KUBE_CONTEXT", { arg: "NAME" }, "kubeconfig context"),
  namespaces: list("CONVEYOR_WATCH_NAMESPACES", { defaultHelp: "all" }, "namespaces to watch"),
  "worker-image": str(
    "CONVEYOR_WORKER_IMAGE",
    { arg: "IMAGE", defaultHelp: `${DEFAULT_WORKER_IMAGE_REPO}:<version>` },
    "the image of pools that name none",
  ),
  "python-worker-image": str(
    "CONVEYOR_PYTHON_WORKER_IMAGE",
    { arg: "IMAGE", defaultHelp: "the --worker-image's -python variant" },
    "the image of pools with a python handler that name none",
  ),
  "metrics-address": str(
    "CONVEYOR_METRICS_ADDRESS",
    { arg: "ADDR", default: "0.0.0.0" },
    "Prometheus /metrics, /healthz, /readyz",
  ),
  "metrics-port": int("CONVEYOR_METRICS_PORT", { default: 8080, max: 65535 }, "0 = any free port"),
  "metrics-api": bool(
    "CONVEYOR_METRICS_API",
    { default: true },
    "serve external.metrics.k8s.io (false for clusters whose external metrics API is taken: use scaling.mode=direct)",
  ),
  "metrics-api-address": str(
    "CONVEYOR_METRICS_API_ADDRESS",
    { arg: "ADDR", default: "0.0.0.0" },
    "the external metrics API's address",
  ),
  "metrics-api-port": int(
    "CONVEYOR_METRICS_API_PORT",
    { default: 6443, max: 65535 },
    "the external metrics API's port",
  ),
  "metrics-api-cert": file(
    "CONVEYOR_METRICS_API_CERT",
    { defaultHelp: "self-signed" },
    "serving certificate (PEM)",
  ),
  "metrics-api-key": file("CONVEYOR_METRICS_API_KEY", {}, "its private key (PEM)"),
  "metrics-api-client-ca": str(
    "CONVEYOR_METRICS_API_CLIENT_CA",
    { arg: "auto|none|FILE", default: "auto" },
    "who may call it: the API server's front proxy (auto: read kube-system/extension-apiserver-authentication; no CA found = refuse every client; none = accept any)",
  ),
  "metrics-api-allowed-names": list(
    "CONVEYOR_METRICS_API_ALLOWED_NAMES",
    { defaultHelp: "any the CA signed" },
    "front-proxy certificate names accepted with a CA FILE",
  ),
  "metrics-api-hosts": list("CONVEYOR_METRICS_API_HOSTS", {}, "names/IPs of the self-signed certificate"),
  "leader-elect": bool("CONVEYOR_LEADER_ELECT", { default: true }, "one active replica, chosen by a Lease"),
  "leader-election-namespace": str(
    "CONVEYOR_LEADER_ELECTION_NAMESPACE",
    { arg: "NS", defaultHelp: 'own namespace, else "default"' },
    "the Lease's namespace",
  ),
  "leader-election-id": str(
    "CONVEYOR_LEADER_ELECTION_ID",
    { arg: "NAME", default: "conveyor-operator" },
    "Lease name",
  ),
  identity: str("POD_NAME", { arg: "ID", defaultHelp: "host + random" }, "this replica's name in the Lease"),
  "lease-duration": duration(
    "CONVEYOR_LEASE_DURATION",
    { deprecatedEnv: "CONVEYOR_LEASE_DURATION_SECONDS", default: "15s", min: "2s", max: "1h" },
    "how long a leader holds the Lease without renewing",
  ),
  "renew-deadline": duration(
    "CONVEYOR_RENEW_DEADLINE",
    { deprecatedEnv: "CONVEYOR_RENEW_DEADLINE_SECONDS", default: "10s", min: "1s", max: "1h" },
    "how long the leader keeps trying to renew before it stops leading",
  ),
  "retry-period": duration(
    "CONVEYOR_RETRY_PERIOD",
    { deprecatedEnv: "CONVEYOR_RETRY_PERIOD_SECONDS", default: "2s", min: "1s", max: "10m" },
    "time between attempts to acquire or renew",
  ),
  workers: int("CONVEYOR_RECONCILE_WORKERS", { default: 4, min: 1, max: 64 }, "concurrent reconciles"),
  relist: duration(
    "CONVEYOR_RELIST",
    {
      deprecatedFlag: "relist-seconds",
      deprecatedEnv: "CONVEYOR_RELIST_SECONDS",
      default: "10m",
      min: "5s",
      max: "24h",
    },
    "resync period: every pool re-checked from the cache (a relist only after a watch error)",
  ),
  "restrict-secret-access": bool(
    "CONVEYOR_RESTRICT_SECRET_ACCESS",
    { default: false },
    "read only Secrets labelled conveyor.dev/secret-access=true or in the operator's own namespace (the chart sets true)",
  ),
  "worker-outbox-max-bytes": int(
    "CONVEYOR_WORKER_OUTBOX_MAX_BYTES",
    { min: 1 << 20, defaultHelp: "the worker's, 268435456 = 256 MiB" },
    "the outbox byte budget given to the workers of pools with job records (their CONVEYOR_OUTBOX_MAX_BYTES)",
  ),
  "log-level": LOG_LEVEL_SETTING,
} as const satisfies Settings;

export const OPERATOR_USAGE = `usage: conveyor operator [options]

Runs the WorkerPool operator. Every flag can also be given by the environment variable shown.

${settingsHelp(OPERATOR_SETTINGS)}
Booleans: --flag alone means true; --flag=false, or true/false, 1/0, yes/no, on/off. ${DURATION_HELP}`;

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
  const o = readOptions(argv, env, OPERATOR_SETTINGS, { usage: OPERATOR_USAGE });
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
  const clientCA = o.str("metrics-api-client-ca")!;
  if (clientCA !== "auto" && clientCA !== "none") o.file("metrics-api-client-ca");
  const leaseDuration = o.duration("lease-duration");
  const renewDeadline = o.duration("renew-deadline");
  const retryPeriod = o.duration("retry-period");
  if (renewDeadline >= leaseDuration)
    throw new OptionError(
      `${name("renew-deadline")} (${renewDeadline}ms) must be less than ${name("lease-duration")} (${leaseDuration}ms)`,
    );
  if (retryPeriod >= renewDeadline)
    throw new OptionError(
      `${name("retry-period")} (${retryPeriod}ms) must be less than ${name("renew-deadline")} (${renewDeadline}ms)`,
    );
  const electionId = o.str("leader-election-id")!;
  if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(electionId))
    throw new OptionError(
      `${name("leader-election-id")}: ${JSON.stringify(electionId)} is not a valid Lease name`,
    );

  const operatorNamespace = ownNamespace() ?? env.POD_NAMESPACE;
  const workerImage = o.raw("worker-image") ?? `${DEFAULT_WORKER_IMAGE_REPO}:${workerImageTag()}`;
  return {
    kubeconfig: o.raw("kubeconfig"),
    context: o.raw("context"),
    namespaces,
    workerImage,
    pythonWorkerImage: o.raw("python-worker-image") ?? pythonVariant(workerImage),
    metricsAddress: o.str("metrics-address")!,
    metricsPort: o.int("metrics-port"),
    metricsApi: o.bool("metrics-api"),
    metricsApiAddress: o.str("metrics-api-address")!,
    metricsApiPort: o.int("metrics-api-port"),
    metricsApiCert,
    metricsApiKey,
    metricsApiClientCA: clientCA,
    metricsApiAllowedNames: o.list("metrics-api-allowed-names"),
    metricsApiHosts: o.list("metrics-api-hosts"),
    leaderElect: o.bool("leader-elect"),
    leaderElectionNamespace: o.raw("leader-election-namespace") ?? operatorNamespace ?? "default",
    leaderElectionId: electionId,
    identity: o.raw("identity") ?? `${hostname()}-${randomBytes(4).toString("hex")}`,
    leaseDurationMs: leaseDuration,
    renewDeadlineMs: renewDeadline,
    retryPeriodMs: retryPeriod,
    workers: o.int("workers"),
    relistMs: o.duration("relist"),
    restrictSecretAccess: o.bool("restrict-secret-access"),
    workerOutboxMaxBytes: o.maybeInt("worker-outbox-max-bytes"),
    ownNamespace: operatorNamespace,
    logLevel: o.choice("log-level"),
  };
}
