// Operator configuration from flags and environment, validated at start: a bad value stops
// the operator with a message naming the flag (and its variable), never a half-running one.
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { DURATION_HELP } from "../lib/duration.ts";
import { OptionError, readOptions, settingsHelp, type Settings } from "../lib/options.ts";
import { LOG_LEVEL_SETTING } from "../lib/settings.ts";
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
  /** The namespace the operator runs in (service account, else POD_NAMESPACE). */
  ownNamespace?: string;
  logLevel: string;
}

/** Every operator flag and its variable (lib/options.ts Setting). */
export const OPERATOR_SETTINGS = {
  kubeconfig: {
    env: "KUBECONFIG",
    kind: "string",
    arg: "PATH",
    defaultHelp: "~/.kube/config, else in-cluster",
    help: "the cluster to manage",
  },
  context: {
    env: "CONVEYOR_KUBE_CONTEXT",
    kind: "string",
    arg: "NAME",
    help: "kubeconfig context",
  },
  namespaces: {
    env: "CONVEYOR_WATCH_NAMESPACES",
    kind: "list",
    defaultHelp: "all",
    help: "namespaces to watch",
  },
  "worker-image": {
    env: "CONVEYOR_WORKER_IMAGE",
    kind: "string",
    arg: "IMAGE",
    defaultHelp: `${DEFAULT_WORKER_IMAGE_REPO}:<version>`,
    help: "the image of pools that name none",
  },
  "metrics-address": {
    env: "CONVEYOR_METRICS_ADDRESS",
    kind: "string",
    arg: "ADDR",
    default: "0.0.0.0",
    help: "Prometheus /metrics, /healthz, /readyz",
  },
  "metrics-port": {
    env: "CONVEYOR_METRICS_PORT",
    kind: "int",
    default: 8080,
    max: 65535,
    help: "0 = any free port",
  },
  "metrics-api": {
    env: "CONVEYOR_METRICS_API",
    kind: "bool",
    default: true,
    help: "serve external.metrics.k8s.io (false for clusters whose external metrics API is taken: use scaling.mode=direct)",
  },
  "metrics-api-address": {
    env: "CONVEYOR_METRICS_API_ADDRESS",
    kind: "string",
    arg: "ADDR",
    default: "0.0.0.0",
    help: "the external metrics API's address",
  },
  "metrics-api-port": {
    env: "CONVEYOR_METRICS_API_PORT",
    kind: "int",
    default: 6443,
    max: 65535,
    help: "the external metrics API's port",
  },
  "metrics-api-cert": {
    env: "CONVEYOR_METRICS_API_CERT",
    kind: "file",
    defaultHelp: "self-signed",
    help: "serving certificate (PEM)",
  },
  "metrics-api-key": {
    env: "CONVEYOR_METRICS_API_KEY",
    kind: "file",
    help: "its private key (PEM)",
  },
  "metrics-api-client-ca": {
    env: "CONVEYOR_METRICS_API_CLIENT_CA",
    kind: "string",
    arg: "auto|none|FILE",
    default: "auto",
    help: "who may call it: the API server's front proxy (auto: read kube-system/extension-apiserver-authentication; no CA found = refuse every client; none = accept any)",
  },
  "metrics-api-allowed-names": {
    env: "CONVEYOR_METRICS_API_ALLOWED_NAMES",
    kind: "list",
    defaultHelp: "any the CA signed",
    help: "front-proxy certificate names accepted with a CA FILE",
  },
  "metrics-api-hosts": {
    env: "CONVEYOR_METRICS_API_HOSTS",
    kind: "list",
    help: "names/IPs of the self-signed certificate",
  },
  "leader-elect": {
    env: "CONVEYOR_LEADER_ELECT",
    kind: "bool",
    default: true,
    help: "one active replica, chosen by a Lease",
  },
  "leader-election-namespace": {
    env: "CONVEYOR_LEADER_ELECTION_NAMESPACE",
    kind: "string",
    arg: "NS",
    defaultHelp: 'own namespace, else "default"',
    help: "the Lease's namespace",
  },
  "leader-election-id": {
    env: "CONVEYOR_LEADER_ELECTION_ID",
    kind: "string",
    arg: "NAME",
    default: "conveyor-operator",
    help: "Lease name",
  },
  identity: {
    env: "POD_NAME",
    kind: "string",
    arg: "ID",
    defaultHelp: "host + random",
    help: "this replica's name in the Lease",
  },
  "lease-duration": {
    env: "CONVEYOR_LEASE_DURATION",
    deprecatedEnv: "CONVEYOR_LEASE_DURATION_SECONDS",
    kind: "duration",
    default: "15s",
    min: "2s",
    max: "1h",
    help: "how long a leader holds the Lease without renewing",
  },
  "renew-deadline": {
    env: "CONVEYOR_RENEW_DEADLINE",
    deprecatedEnv: "CONVEYOR_RENEW_DEADLINE_SECONDS",
    kind: "duration",
    default: "10s",
    min: "1s",
    max: "1h",
    help: "how long the leader keeps trying to renew before it stops leading",
  },
  "retry-period": {
    env: "CONVEYOR_RETRY_PERIOD",
    deprecatedEnv: "CONVEYOR_RETRY_PERIOD_SECONDS",
    kind: "duration",
    default: "2s",
    min: "1s",
    max: "10m",
    help: "time between attempts to acquire or renew",
  },
  workers: {
    env: "CONVEYOR_RECONCILE_WORKERS",
    kind: "int",
    default: 4,
    min: 1,
    max: 64,
    help: "concurrent reconciles",
  },
  relist: {
    deprecatedFlag: "relist-seconds",
    env: "CONVEYOR_RELIST",
    deprecatedEnv: "CONVEYOR_RELIST_SECONDS",
    kind: "duration",
    default: "10m",
    min: "5s",
    max: "24h",
    help: "resync period: every pool re-checked from the cache (a relist only after a watch error)",
  },
  "restrict-secret-access": {
    env: "CONVEYOR_RESTRICT_SECRET_ACCESS",
    kind: "bool",
    default: false,
    help: "read only Secrets labelled conveyor.dev/secret-access=true or in the operator's own namespace (the chart sets true)",
  },
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
  return {
    kubeconfig: o.raw("kubeconfig"),
    context: o.raw("context"),
    namespaces,
    workerImage: o.raw("worker-image") ?? `${DEFAULT_WORKER_IMAGE_REPO}:${workerImageTag()}`,
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
    ownNamespace: operatorNamespace,
    logLevel: o.choice("log-level"),
  };
}
