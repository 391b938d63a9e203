// WorkerPools as the dashboard (api/) shows them, read through @kubernetes/client-node when a
// kubeconfig or an in-cluster service account is available (the Pools page is hidden when
// not): status and conditions, every scale decision from the pool's Events (the operator
// writes "from → to: reason: message"), and the pods with their deletion cost and, from the
// workers' heartbeats, their busy/free slots.
import { CoreV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { GROUP, PLURAL, VERSION } from "./apis/v1alpha1/schema.ts";
import { kubernetesConfigured } from "./kubeEnvironment.ts";
import { DELETION_COST_ANNOTATION, POOL_LABEL } from "./controllers/names.ts";
import type { WorkerPool } from "./apis/v1alpha1/types.ts";
import type { QueueAdmin } from "../queue/index.ts";

export interface ScaleDecision {
  at: string;
  type: string;
  reason: string;
  from: number | null;
  to: number | null;
  backlog: number | null;
  message: string;
  count: number;
}

const DECISION = /^(\d+) → (\d+): ([^:]+): (.*)$/s;

export function parseDecision(e: {
  lastTimestamp?: Date | string;
  eventTime?: Date | string;
  firstTimestamp?: Date | string;
  metadata?: { creationTimestamp?: Date | string };
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
}): ScaleDecision {
  const message = e.message ?? "";
  const m = DECISION.exec(message);
  const backlog = /backlog (\d+)/.exec(message);
  const at = e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? e.metadata?.creationTimestamp ?? "";
  return {
    at: at instanceof Date ? at.toISOString() : String(at),
    type: e.type ?? "Normal",
    reason: m ? m[3]! : (e.reason ?? ""),
    from: m ? Number(m[1]) : null,
    to: m ? Number(m[2]) : null,
    backlog: backlog ? Number(backlog[1]) : null,
    message,
    count: e.count ?? 1,
  };
}

/** Implements api/'s PoolSource (the CLI wires it in: api/ does not import operator/). */
export class PoolReader {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly admin: QueueAdmin;

  constructor(kc: KubeConfig, admin: QueueAdmin) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.core = kc.makeApiClient(CoreV1Api);
    this.admin = admin;
  }

  /** A reader when a cluster is configured (KUBECONFIG, ~/.kube/config, in-cluster); else null. */
  static fromEnvironment(admin: QueueAdmin, env: NodeJS.ProcessEnv = process.env): PoolReader | null {
    if (!kubernetesConfigured(env)) return null;
    const kc = new KubeConfig();
    kc.loadFromDefault();
    if (!kc.getCurrentCluster()) return null;
    return new PoolReader(kc, admin);
  }

  async list(allowed: (queue: string) => boolean) {
    const list = (await this.custom.listClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: PLURAL,
    })) as {
      items: WorkerPool[];
    };
    return list.items.filter((p) => allowed(p.spec.queue)).map(summary);
  }

  async detail(namespace: string, name: string, allowed: (queue: string) => boolean) {
    let pool: WorkerPool;
    try {
      pool = (await this.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        plural: PLURAL,
        namespace,
        name,
      })) as WorkerPool;
    } catch (err) {
      if ((err as { code?: number }).code === 404) return null;
      throw err;
    }
    if (!allowed(pool.spec.queue)) return null;
    const [events, pods, reports] = await Promise.all([
      this.core.listNamespacedEvent({
        namespace,
        fieldSelector: `involvedObject.kind=WorkerPool,involvedObject.name=${name}`,
      }),
      this.core.listNamespacedPod({ namespace, labelSelector: `${POOL_LABEL}=${name}` }),
      this.admin.workers(pool.spec.queue).catch(() => []),
    ]);
    const byPod = new Map(reports.map((r) => [r.pod, r]));
    const decisions = events.items.map(parseDecision).sort((a, b) => a.at.localeCompare(b.at));
    return {
      ...summary(pool),
      conditions: pool.status?.conditions ?? [],
      decisions,
      pods: pods.items.map((p) => {
        const report = byPod.get(p.metadata?.name ?? "");
        const cost = p.metadata?.annotations?.[DELETION_COST_ANNOTATION];
        return {
          name: p.metadata?.name ?? "",
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
    minReplicas: p.spec.scaling?.minReplicas ?? null,
    maxReplicas: p.spec.scaling?.maxReplicas ?? null,
    lastDecision: s.lastDecision ?? null,
    ready: (s.conditions ?? []).find((c) => c.type === "Ready")?.status ?? "Unknown",
  };
}
