// WorkerPools as the dashboard (api/) shows them, read with the operator's own client
// (kube/client.ts over kube/kubeConfig.ts: a kubeconfig or the in-cluster service account; the
// Pools page is hidden when there is neither): status and conditions, the operator's recent
// scale decisions (status.recentDecisions, structured — never parsed from Event text) with the
// pool's problems as warnings, and the pods with their deletion cost and, from the workers'
// heartbeats, their busy/free slots.
import { RESOURCES, resourcePath } from "./apis/coordinates.ts";
import { CONDITION_DEGRADED, type WorkerPool, type WorkerPoolStatus } from "./apis/v1alpha1/types.ts";
import { kubernetesConfigured } from "./kubeEnvironment.ts";
import { DELETION_COST_ANNOTATION, POOL_LABEL } from "./controllers/names.ts";
import type { Pod } from "./controllers/objects.ts";
import { KubeClient } from "./kube/client.ts";
import { loadKubeConfig } from "./kube/kubeConfig.ts";
import { countersFromFields, countersSince, emptyCounters, type QueueAdmin } from "../queue/index.ts";
import { figures } from "./rollout/judge.ts";

export interface RecordedDecision {
  at: string;
  type: string;
  reason: string;
  from: number | null;
  to: number | null;
  backlog: number | null;
  message: string;
  count: number;
}

/** The decisions the Pools page lists: the recent scale decisions, and a Degraded pool's problem as a warning. */
export function poolDecisions(status: WorkerPoolStatus | undefined): RecordedDecision[] {
  const decisions: RecordedDecision[] = (status?.recentDecisions ?? []).map((d) => ({
    at: d.at ?? "",
    type: "Normal",
    reason: d.reason ?? "",
    from: d.from ?? null,
    to: d.replicas ?? null,
    backlog: d.backlog ?? null,
    message: d.message ?? "",
    count: 1,
  }));
  const degraded = status?.conditions?.find((c) => c.type === CONDITION_DEGRADED && c.status === "True");
  if (degraded)
    decisions.push({
      at: degraded.lastTransitionTime ?? "",
      type: "Warning",
      reason: degraded.reason ?? "",
      from: null,
      to: null,
      backlog: null,
      message: degraded.message ?? "",
      count: 1,
    });
  return decisions.sort((a, b) => a.at.localeCompare(b.at));
}

/** The replica cap in force (rate limit or resources), what binds it and why; null when none. */
export function poolCap(status: WorkerPoolStatus | undefined) {
  const c = status?.control;
  if (c?.replicaCap === undefined) return null;
  return { replicas: c.replicaCap, by: c.capBy ?? null, reason: c.capReason ?? "" };
}

/** The rollout as the Pools list shows it (status.rollout without its counters); null when none. */
export function poolRollout(p: WorkerPool) {
  const r = p.status?.rollout;
  if (!r?.phase) return null;
  return {
    phase: r.phase,
    step: r.step ?? 0,
    steps: (p.spec.rollout?.canary.steps ?? []).map((s) => ({
      weight: s.weight,
      holdSeconds: s.holdSeconds ?? 0,
    })),
    weight: r.weight ?? 0,
    stableHash: r.stableHash ?? null,
    canaryHash: r.canaryHash ?? null,
    startedAt: r.startedAt ?? null,
    stepStartedAt: r.stepStartedAt ?? null,
    verdict: r.verdict ?? null,
    message: r.message ?? "",
    summary: r.summary ?? "",
  };
}

/** Implements api/'s PoolSource (the CLI wires it in: api/ does not import operator/). */
export class PoolReader {
  private readonly client: () => Promise<KubeClient>;
  private readonly admin: QueueAdmin;

  /** `client`: a KubeClient, or how to make one the first time it is needed. */
  constructor(client: KubeClient | (() => Promise<KubeClient>), admin: QueueAdmin) {
    let made: Promise<KubeClient> | undefined;
    this.client = client instanceof KubeClient ? async () => client : () => (made ??= client());
    this.admin = admin;
  }

  /**
   * A reader when a cluster is configured (KUBECONFIG, ~/.kube/config, in-cluster); else null.
   * The kubeconfig is loaded at the first read; an unusable one fails that read with a
   * message naming the file and field.
   */
  static fromEnvironment(admin: QueueAdmin, env: NodeJS.ProcessEnv = process.env): PoolReader | null {
    if (!kubernetesConfigured(env)) return null;
    return new PoolReader(
      async () => new KubeClient(await loadKubeConfig({ env }), { userAgent: "conveyor-api" }),
      admin,
    );
  }

  async list(allowed: (queue: string) => boolean) {
    const client = await this.client();
    const list = await client.listAll<WorkerPool>(resourcePath(RESOURCES.workerPools, {}));
    return list.items.filter((p) => allowed(p.spec.queue)).map(summary);
  }

  async detail(namespace: string, name: string, allowed: (queue: string) => boolean) {
    const client = await this.client();
    const pool = await client.get<WorkerPool>(resourcePath(RESOURCES.workerPools, { namespace, name }));
    if (!pool || !allowed(pool.spec.queue)) return null;
    const [pods, reports] = await Promise.all([
      client.listAll<Pod & { status?: { conditions?: { type: string; status: string }[] } }>(
        resourcePath(RESOURCES.pods, { namespace }),
        { labelSelector: `${POOL_LABEL}=${name}` },
      ),
      this.admin.workers(pool.spec.queue),
    ]);
    const rollout = poolRollout(pool);
    const byPod = new Map(reports.map((r) => [r.pod, r]));
    return {
      ...summary(pool),
      conditions: pool.status?.conditions ?? [],
      decisions: poolDecisions(pool.status),
      rollout: rollout && { ...rollout, ...(await this.stepFigures(pool)) },
      pods: pods.items.map((p) => {
        const report = byPod.get(p.metadata.name ?? "");
        const cost = p.metadata.annotations?.[DELETION_COST_ANNOTATION];
        return {
          name: p.metadata.name ?? "",
          phase: p.status?.phase ?? "",
          ready: (p.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True"),
          deletionCost: cost === undefined ? null : Number(cost),
          slots: report?.slots ?? null,
          busy: report?.busy ?? null,
          draining: report?.draining ?? null,
        };
      }),
    };
  }

  /**
   * Each version's figures over the step in progress (its counters now less the step's baseline,
   * as the operator judges it); nulls when no step is in progress or not yet started.
   */
  private async stepFigures(pool: WorkerPool) {
    const r = pool.status?.rollout;
    if (r?.phase !== "Progressing" || !r.baseline || !r.stableHash || !r.canaryHash)
      return { stable: null, canary: null };
    const now = await this.admin.versionCounters(pool.spec.queue);
    const since = (hash: string, base: Record<string, number> | undefined) =>
      figures(countersSince(now.get(hash) ?? emptyCounters(), countersFromFields(base)));
    return { stable: since(r.stableHash, r.baseline.stable), canary: since(r.canaryHash, r.baseline.canary) };
  }
}

function summary(p: WorkerPool) {
  const s = p.status ?? {};
  return {
    namespace: p.metadata.namespace ?? "",
    name: p.metadata.name,
    queue: p.spec.queue,
    replicas: s.replicas ?? 0,
    readyReplicas: s.readyReplicas ?? 0,
    desiredReplicas: s.desiredReplicas ?? 0,
    backlog: s.backlog ?? null,
    inflight: s.inflight ?? null,
    oldestReadySince: s.oldestReadySince ?? null,
    targetWaitSeconds: p.spec.scaling?.targetWaitSeconds ?? null,
    minReplicas: p.spec.scaling?.minReplicas ?? null,
    maxReplicas: p.spec.scaling?.maxReplicas ?? null,
    lastDecision: s.lastDecision ?? null,
    cap: poolCap(s),
    /** The contract the operator published for spec.contract (hash, publishedAt, source); null when none. */
    contract: s.contract ?? null,
    ready: (s.conditions ?? []).find((c) => c.type === "Ready")?.status ?? "Unknown",
    /** The canary rollout in progress, or how the last one ended (spec.rollout); null when none. */
    rollout: poolRollout(p),
  };
}
