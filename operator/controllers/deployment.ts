// The worker Deployment of a pool: the generic worker image started as `conveyor worker`,
// configured by environment per the worker contract, locked down (non-root, read-only root
// filesystem, no privilege escalation, no capabilities, seccomp RuntimeDefault), with probes on
// the worker's endpoints and a grace period long enough for warm shutdown to finish.
import type { V1Container, V1EnvVar, V1PodSpec, V1Volume, V1VolumeMount } from "@kubernetes/client-node";
import { RESOURCES, apiVersionOf, resourcePath } from "../apis/coordinates.ts";
import { RESERVED_ENV, RESERVED_ENV_PREFIX, WORKER_CONTAINER } from "../apis/v1alpha1/schema.ts";
import { encodeHandler, handlerFromFields, WORKER_ENV, WORKER_PORT } from "../../lib/workerContract.ts";
import type { WorkerPool, WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import { CONFIG_HASH_ANNOTATION, ownerReference, poolLabels, selectorLabels } from "./names.ts";
import { configHash, isSubset, subsetDiff } from "./diff.ts";
import type { ReconcileContext } from "./context.ts";
import type { Deployment } from "./objects.ts";

export { WORKER_PORT };
/** Seconds the pod gets beyond the drain: hand-back of unfinished jobs and exit. */
export const GRACE_MARGIN_SECONDS = 10;
export const DEFAULT_WORKER_IMAGE_REPO = "ghcr.io/conveyor-dev/conveyor-worker";
/** The worker image with Python 3 and the handler kit: the default of pools with a python handler. */
export const PYTHON_WORKER_IMAGE_SUFFIX = "-python";

/**
 * The Python variant of a worker image, in the same registry at the same tag or digest:
 * `…/conveyor-worker:0.1.0` → `…/conveyor-worker-python:0.1.0`.
 */
export function pythonVariant(image: string): string {
  const m = /^(.*?\/?[^/:@]+)((?::[^/@]+)?(?:@.+)?)$/.exec(image);
  return m ? `${m[1]}${PYTHON_WORKER_IMAGE_SUFFIX}${m[2]}` : `${image}${PYTHON_WORKER_IMAGE_SUFFIX}`;
}
/**
 * The worker's Node options: semi-spaces of 8 MiB instead of V8 growing them to 32 MiB under load
 * (peak RSS ~197 → ~158 MiB at concurrency 1, the same CPU: docs/performance.md, worker step 9).
 * A pool that sets NODE_OPTIONS in its template's env replaces them.
 */
export const WORKER_NODE_OPTIONS = "--max-semi-space-size=8";

/**
 * Where the worker finds the credentials of spec.resources: `<dir>/<resource>/<key id>`, one
 * projected volume of the resources' Secrets (only the declared ids), read-only. A mounted file
 * keeps the keys out of the environment a command handler inherits; an http handler's sidecar
 * mounts the same volume by name.
 */
export const RESOURCES_DIR = "/var/run/conveyor/resources";
export const RESOURCES_VOLUME = "conveyor-resources";
/** spec.notify's signing secret, one file of a Secret volume (never an env value in the pod spec). */
export const NOTIFY_DIR = "/var/run/conveyor/notify";
export const NOTIFY_VOLUME = "conveyor-notify";

export interface DeploymentOptions {
  /** Image when spec.template.image is unset. */
  defaultImage: string;
  /** Image of a pool with a python handler when spec.template.image is unset (else pythonVariant(defaultImage)). */
  defaultPythonImage?: string;
  /** CONVEYOR_OUTBOX_MAX_BYTES for pools with job records (spec.database); unset: the worker's default. */
  outboxMaxBytes?: number;
}

/** The worker's CONVEYOR_HANDLER value for a pool's spec.handler (module:/path, http://127.0.0.1:port/path, command:[...], python:…). */
export function handlerEnv(h: WorkerPoolSpec["handler"]): string {
  return encodeHandler(handlerFromFields(h));
}

/** The URL the worker (and the operator) connect to: spec.redis.tls turns redis:// into rediss:// (?tls=true for cluster and sentinel URLs). */
export function effectiveRedisUrl(spec: WorkerPoolSpec): string {
  const url = spec.redis.url;
  if (!spec.redis.tls) return url;
  if (url.startsWith("redis://")) return `rediss://${url.slice("redis://".length)}`;
  if (/^redis-(cluster|sentinel):\/\//.test(url) && !/[?&]tls=true/.test(url))
    return `${url}${url.includes("?") ? "&" : "?"}tls=true`;
  return url;
}

export function drainSeconds(spec: WorkerPoolSpec): number {
  return spec.drainSeconds ?? spec.maxJobSeconds;
}

export function terminationGraceSeconds(spec: WorkerPoolSpec): number {
  return drainSeconds(spec) + GRACE_MARGIN_SECONDS;
}

function isReservedEnv(name: string): boolean {
  return (RESERVED_ENV as readonly string[]).includes(name) || name.startsWith(RESERVED_ENV_PREFIX);
}

export function workerEnv(spec: WorkerPoolSpec, outboxMaxBytes?: number): V1EnvVar[] {
  const env: V1EnvVar[] = [
    { name: WORKER_ENV.queue, value: spec.queue },
    ...(spec.nextQueue ? [{ name: WORKER_ENV.nextQueue, value: spec.nextQueue }] : []),
    { name: WORKER_ENV.handler, value: handlerEnv(spec.handler) },
    ...(spec.handler.passCredentials ? [{ name: WORKER_ENV.handlerCredentials, value: "true" }] : []),
    { name: WORKER_ENV.concurrency, value: String(spec.concurrency) },
    ...(spec.batch
      ? [
          { name: WORKER_ENV.batchSize, value: String(spec.batch.size) },
          ...(spec.batch.minSize !== undefined
            ? [{ name: WORKER_ENV.batchMin, value: String(spec.batch.minSize) }]
            : []),
          ...(spec.batch.waitMs !== undefined
            ? [{ name: WORKER_ENV.batchWait, value: `${spec.batch.waitMs}ms` }]
            : []),
        ]
      : []),
    { name: WORKER_ENV.jobTimeout, value: String(spec.maxJobSeconds) },
    { name: WORKER_ENV.drain, value: String(drainSeconds(spec)) },
    // The former names too, for a pool pinned to a worker image older than the rename; they go
    // when those images do (CHANGELOG: deprecated for one release).
    { name: WORKER_ENV.jobTimeoutSeconds, value: String(spec.maxJobSeconds) },
    { name: WORKER_ENV.drainSeconds, value: String(drainSeconds(spec)) },
    { name: WORKER_ENV.port, value: String(WORKER_PORT) },
    { name: WORKER_ENV.redisUrl, value: effectiveRedisUrl(spec) },
    // (only when set: a pool without it keeps its pod template, so nothing rolls)
    ...(spec.redis.durability ? [{ name: WORKER_ENV.durability, value: spec.redis.durability }] : []),
    ...(resourcesVolume(spec) ? [{ name: WORKER_ENV.resourcesDir, value: RESOURCES_DIR }] : []),
    ...(spec.notify
      ? [
          { name: WORKER_ENV.notifyUrl, value: spec.notify.url },
          ...(spec.notify.events
            ? [{ name: WORKER_ENV.notifyEvents, value: spec.notify.events.join(",") }]
            : []),
          { name: WORKER_ENV.notifySecretFile, value: `${NOTIFY_DIR}/secret` },
          ...(spec.notify.allow?.length
            ? [{ name: WORKER_ENV.notifyAllow, value: spec.notify.allow.join(",") }]
            : []),
        ]
      : []),
  ];
  if (spec.redis.secretRef) {
    env.push({
      name: WORKER_ENV.redisPassword,
      valueFrom: { secretKeyRef: { name: spec.redis.secretRef.name, key: spec.redis.secretRef.key } },
    });
  }
  if (spec.database) {
    env.push({
      name: WORKER_ENV.databaseUrl,
      valueFrom: { secretKeyRef: { name: spec.database.secretRef.name, key: spec.database.secretRef.key } },
    });
    if (outboxMaxBytes !== undefined)
      env.push({ name: WORKER_ENV.outboxMaxBytes, value: String(outboxMaxBytes) });
  }
  env.push({ name: WORKER_ENV.podName, valueFrom: { fieldRef: { fieldPath: "metadata.name" } } });
  if (!spec.template.env?.some((e) => e.name === WORKER_ENV.nodeOptions))
    env.push({ name: WORKER_ENV.nodeOptions, value: WORKER_NODE_OPTIONS });
  // The schema rejects reserved names; this keeps an object stored before that rule out too.
  for (const e of spec.template.env ?? []) if (!isReservedEnv(e.name)) env.push(e);
  return env;
}

/** The projected volume of spec.resources' Secrets (undefined: no resource names one). */
export function resourcesVolume(spec: WorkerPoolSpec): V1Volume | undefined {
  const sources = (spec.resources ?? [])
    .filter((r) => r.secretRef)
    .map((r) => ({
      secret: {
        name: r.secretRef!.name,
        items: r.keys.map((k) => ({ key: k.id, path: `${r.name}/${k.id}` })),
      },
    }));
  if (sources.length === 0) return undefined;
  // 0444: readable whatever uid the template runs as; only containers that mount it see it.
  return { name: RESOURCES_VOLUME, projected: { defaultMode: 0o444, sources } };
}

/** The Secret volume of spec.notify's signing secret (undefined: no notify). */
export function notifyVolume(spec: WorkerPoolSpec): V1Volume | undefined {
  if (!spec.notify) return undefined;
  const { name, key } = spec.notify.secretRef;
  // 0444: readable whatever uid the template runs as; only the worker container mounts it.
  return {
    name: NOTIFY_VOLUME,
    secret: { secretName: name, items: [{ key, path: "secret" }], defaultMode: 0o444 },
  };
}

/** The pod label of a rollout's canary (its Deployment's selector has it too). */
export const TRACK_LABEL = "conveyor.dev/track";
/** The annotation of a worker Deployment naming its template version (CONVEYOR_TEMPLATE_VERSION). */
export const TEMPLATE_VERSION_ANNOTATION = "conveyor.dev/template-version";

/** Which of a pool's Deployments: the stable one (the pool's name) or a rollout's canary. */
export interface DeploymentVariant {
  canary?: boolean;
  /** The template version its workers count their jobs under (pools with spec.rollout). */
  version?: string;
}

/** The canary Deployment's name: `<pool>-canary`. */
export function canaryName(pool: { metadata: { name: string } }): string {
  return `${pool.metadata.name}-canary`;
}

/**
 * The version of a pool's pod template: a hash of the template the spec makes (without the
 * version itself), so any change a pod would see is a new version.
 */
export function templateVersion(pool: WorkerPool, spec: WorkerPoolSpec, opts: DeploymentOptions): string {
  return configHash(desiredDeployment(pool, spec, opts).spec!.template).slice(0, 12);
}

/** The Deployment the operator applies, without spec.replicas (see withReplicas). */
export function desiredDeployment(
  pool: WorkerPool,
  spec: WorkerPoolSpec,
  opts: DeploymentOptions,
  variant: DeploymentVariant = {},
): Deployment {
  const t = spec.template;
  const labels = poolLabels(pool);
  const credentials = resourcesVolume(spec);
  const worker = workerContainer(spec, opts, credentials);
  if (variant.version)
    worker.env = [...(worker.env ?? []), { name: WORKER_ENV.templateVersion, value: variant.version }];
  const podSpec = workerPodSpec(spec, worker, credentials);
  const track: Record<string, string> = variant.canary ? { [TRACK_LABEL]: "canary" } : {};
  const deployment: Deployment = {
    apiVersion: apiVersionOf(RESOURCES.deployments),
    kind: RESOURCES.deployments.kind,
    metadata: {
      name: variant.canary ? canaryName(pool) : pool.metadata.name,
      namespace: pool.metadata.namespace,
      labels: { ...labels, ...track },
      ownerReferences: [ownerReference(pool)],
    },
    spec: {
      selector: { matchLabels: { ...selectorLabels(pool), ...track } },
      revisionHistoryLimit: 3,
      // Workers pull work; a surge pod is harmless and an unavailable one only slows the queue.
      strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: "25%", maxUnavailable: 0 } },
      template: {
        metadata: {
          labels: { ...(t.labels ?? {}), ...labels, ...track },
          annotations: {
            ...(t.annotations ?? {}),
            "prometheus.io/scrape": "true",
            "prometheus.io/port": String(WORKER_PORT),
            "prometheus.io/path": "/metrics",
          },
        },
        spec: podSpec,
      },
    },
  };
  deployment.metadata.annotations = {
    [CONFIG_HASH_ANNOTATION]: configHash(deployment),
    ...(variant.version ? { [TEMPLATE_VERSION_ANNOTATION]: variant.version } : {}),
  };
  return deployment;
}

/** The worker container: the generic worker, its probes, its mounts, locked down. */
function workerContainer(
  spec: WorkerPoolSpec,
  opts: DeploymentOptions,
  credentials: V1Volume | undefined,
): V1Container {
  const t = spec.template;
  const tmpMount: V1VolumeMount = { name: "tmp", mountPath: "/tmp" };
  return {
    name: WORKER_CONTAINER,
    image:
      t.image ??
      (spec.handler.python
        ? (opts.defaultPythonImage ?? pythonVariant(opts.defaultImage))
        : opts.defaultImage),
    ...(t.imagePullPolicy ? { imagePullPolicy: t.imagePullPolicy } : {}),
    args: ["worker"],
    env: workerEnv(spec, opts.outboxMaxBytes),
    ...(t.envFrom?.length ? { envFrom: t.envFrom } : {}),
    ports: [{ name: "metrics", containerPort: WORKER_PORT, protocol: "TCP" }],
    readinessProbe: {
      httpGet: { path: "/readyz", port: "metrics" },
      periodSeconds: 5,
      timeoutSeconds: 2,
      failureThreshold: 2,
    },
    // Generous: a CPU-heavy handler may delay the event loop; a killed worker costs its jobs a redelivery.
    livenessProbe: {
      httpGet: { path: "/healthz", port: "metrics" },
      initialDelaySeconds: 10,
      periodSeconds: 10,
      timeoutSeconds: 5,
      failureThreshold: 6,
    },
    resources: t.resources ?? {},
    securityContext: {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    },
    volumeMounts: [
      tmpMount,
      ...(credentials ? [{ name: RESOURCES_VOLUME, mountPath: RESOURCES_DIR, readOnly: true }] : []),
      ...(spec.notify ? [{ name: NOTIFY_VOLUME, mountPath: NOTIFY_DIR, readOnly: true }] : []),
      ...(t.volumeMounts ?? []).filter(
        (m) => m.mountPath !== "/tmp" && m.name !== RESOURCES_VOLUME && m.name !== NOTIFY_VOLUME,
      ),
    ],
  };
}

/** The pod: the worker, the template's sidecars and volumes, non-root by default. */
function workerPodSpec(
  spec: WorkerPoolSpec,
  worker: V1Container,
  credentials: V1Volume | undefined,
): V1PodSpec {
  const t = spec.template;
  const volumes: V1Volume[] = [
    { name: "tmp", emptyDir: {} },
    ...(credentials ? [credentials] : []),
    ...(notifyVolume(spec) ? [notifyVolume(spec)!] : []),
    ...(t.volumes ?? []).filter(
      (v) => v.name !== "tmp" && v.name !== RESOURCES_VOLUME && v.name !== NOTIFY_VOLUME,
    ),
  ];
  return {
    containers: [worker, ...(t.containers ?? []).filter((c) => c.name !== WORKER_CONTAINER)],
    volumes,
    terminationGracePeriodSeconds: terminationGraceSeconds(spec),
    enableServiceLinks: false,
    securityContext: t.securityContext ?? {
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      fsGroup: 65532,
      seccompProfile: { type: "RuntimeDefault" },
    },
    ...(t.serviceAccountName
      ? { serviceAccountName: t.serviceAccountName }
      : { automountServiceAccountToken: false }),
    ...(t.priorityClassName ? { priorityClassName: t.priorityClassName } : {}),
    ...(t.nodeSelector ? { nodeSelector: t.nodeSelector } : {}),
    ...(t.tolerations?.length ? { tolerations: t.tolerations } : {}),
    ...(t.affinity ? { affinity: t.affinity } : {}),
    ...(t.topologySpreadConstraints?.length
      ? { topologySpreadConstraints: t.topologySpreadConstraints }
      : {}),
    ...(t.imagePullSecrets?.length ? { imagePullSecrets: t.imagePullSecrets } : {}),
  };
}

/** The applied configuration: desired plus spec.replicas (kept at the live value, see reconcile). */
export function withReplicas(d: Deployment, replicas: number): Deployment {
  return { ...d, spec: { ...d.spec, replicas } };
}

/** Replicas of a Deployment the operator creates: its minimum, or 1 when there is already work. */
export function initialReplicas(spec: WorkerPoolSpec, backlog: number | undefined): number {
  if (spec.replicas !== undefined) return spec.replicas;
  const s = spec.scaling;
  if (s.paused) return s.minReplicas;
  if (backlog !== undefined && backlog > s.activationBacklog) return Math.max(1, s.minReplicas);
  return s.minReplicas;
}

/**
 * The Deployment concern: apply the desired Deployment when it changed (config hash) or
 * drifted (not a subset of the live object) — otherwise no API call at all. The applied
 * configuration carries spec.replicas at its live value (read fresh), because server-side apply
 * resets a field its manager stops applying; replica changes go through the scale subresource.
 * The apply carries the read's resourceVersion: a scale in between is never silently reverted.
 */
export async function reconcileDeployment(
  ctx: ReconcileContext,
  key: string,
  pool: WorkerPool,
  spec: WorkerPoolSpec,
  live: Deployment | undefined,
  backlog: number | undefined,
  variant: DeploymentVariant & { replicas?: number; overlayKey?: string } = {},
): Promise<Deployment> {
  const desired = desiredDeployment(pool, spec, deploymentOptions(ctx), variant);
  const hash = desired.metadata.annotations![CONFIG_HASH_ANNOTATION];
  if (live && live.metadata.annotations?.[CONFIG_HASH_ANNOTATION] === hash && isSubset(desired, live))
    return live;
  const path = resourcePath(RESOURCES.deployments, {
    namespace: pool.metadata.namespace,
    name: desired.metadata.name,
  });
  let replicas: number;
  let resourceVersion: string | undefined;
  if (live) {
    const fresh = await ctx.client.get<Deployment>(path);
    replicas = fresh?.spec?.replicas ?? live.spec?.replicas ?? 0;
    // A precondition: a scale (the HPA's) landing between that read and this apply makes it
    // fail with 409 (the reconcile retries) instead of reverting the scale.
    resourceVersion = fresh?.metadata.resourceVersion;
    const changed =
      live.metadata.annotations?.[CONFIG_HASH_ANNOTATION] !== hash
        ? ["spec"]
        : subsetDiff(desired, live).slice(0, 10);
    ctx.log.info({ pool: key, name: desired.metadata.name, changed }, "updating worker Deployment");
  } else {
    replicas = variant.replicas ?? initialReplicas(spec, backlog);
    ctx.log.info({ pool: key, replicas, name: desired.metadata.name }, "creating worker Deployment");
  }
  const body = withReplicas(desired, replicas);
  if (resourceVersion) body.metadata = { ...body.metadata, resourceVersion };
  const applied = await ctx.client.apply<Deployment>(path, body);
  ctx.deploymentOverlay.set(variant.overlayKey ?? key, applied);
  return applied;
}

/** The Deployment options of the operator's configuration. */
export function deploymentOptions(ctx: ReconcileContext): DeploymentOptions {
  return {
    defaultImage: ctx.defaultImage,
    defaultPythonImage: ctx.defaultPythonImage,
    outboxMaxBytes: ctx.workerOutboxMaxBytes,
  };
}
