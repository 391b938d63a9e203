// Where a pool's contract comes from (spec.contract): inline, or a key of a ConfigMap. ConfigMaps
// are watched only as pools name them — one single-object informer (field selector on the name)
// per referenced ConfigMap, stopped when no pool names it any more — so the operator neither
// lists nor caches every ConfigMap of the cluster; a change re-reconciles the pools naming it.
import type { Logger } from "pino";
import { parse as parseYaml } from "yaml";
import type { Contract } from "../../queue/index.ts";
import { RESOURCES, resourcePath } from "../apis/coordinates.ts";
import type { WorkerPoolSpec } from "../apis/v1alpha1/types.ts";
import { apiMessage, type KubeClient, type KubeObject } from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import type { OperatorMetrics } from "../metrics.ts";
import { Reason, type Problem } from "./reasons.ts";

export interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

/** What a pool's spec.contract resolves to this pass. */
export type ResolvedContract =
  | { contract: unknown; source: string; problem?: undefined; pending?: undefined }
  | { problem: Problem; contract?: undefined; pending?: undefined }
  /** Its ConfigMap's cache has not been listed yet: the listing re-reconciles the pool. */
  | { pending: true; contract?: undefined; problem?: undefined };

export class ConfigMapWatch {
  private readonly client: KubeClient;
  private readonly log: Logger;
  private readonly metrics: OperatorMetrics;
  private readonly enqueue: (poolKey: string) => void;
  /** ConfigMap `namespace/name` → its informer and the pools naming it. */
  private readonly watched = new Map<string, { informer: Informer<ConfigMap>; pools: Set<string> }>();
  /** Pool key → the ConfigMap it names. */
  private readonly named = new Map<string, string>();

  constructor(deps: {
    client: KubeClient;
    log: Logger;
    metrics: OperatorMetrics;
    enqueue: (poolKey: string) => void;
  }) {
    this.client = deps.client;
    this.log = deps.log;
    this.metrics = deps.metrics;
    this.enqueue = deps.enqueue;
  }

  /** The pool names this ConfigMap (undefined: none): watch it, and stop watching the one it named before. */
  reference(poolKey: string, cm: { namespace: string; name: string } | undefined): void {
    const want = cm && `${cm.namespace}/${cm.name}`;
    const had = this.named.get(poolKey);
    if (had === want) return;
    if (had) this.release(poolKey, had);
    if (!cm || !want) return;
    this.named.set(poolKey, want);
    let w = this.watched.get(want);
    if (!w) {
      const informer = new Informer<ConfigMap>(this.client, {
        path: resourcePath(RESOURCES.configMaps, { namespace: cm.namespace }),
        fieldSelector: `metadata.name=${cm.name}`,
        log: this.log,
        metrics: this.metrics,
      });
      const entry = { informer, pools: new Set<string>() };
      const poke = () => {
        for (const p of entry.pools) this.enqueue(p);
      };
      // (synced too: a ConfigMap missing at the first listing is reported by the next reconcile)
      informer.on({ add: poke, update: poke, delete: poke, synced: poke });
      informer.start();
      this.watched.set(want, (w = entry));
      this.log.debug({ configMap: want }, "watching ConfigMap (a pool's contract)");
    }
    w.pools.add(poolKey);
  }

  /** The pool is gone. */
  forget(poolKey: string): void {
    const had = this.named.get(poolKey);
    if (had) this.release(poolKey, had);
  }

  private release(poolKey: string, cmKey: string): void {
    this.named.delete(poolKey);
    const w = this.watched.get(cmKey);
    if (!w) return;
    w.pools.delete(poolKey);
    if (w.pools.size > 0) return;
    this.watched.delete(cmKey);
    void w.informer.stop();
    this.log.debug({ configMap: cmKey }, "no longer watching ConfigMap");
  }

  /** The ConfigMap as last seen: undefined while not listed yet, null when it does not exist. */
  get(namespace: string, name: string): { configMap: ConfigMap | null; error?: string } | undefined {
    const w = this.watched.get(`${namespace}/${name}`);
    if (!w) return undefined;
    if (!w.informer.hasSynced)
      // listing fails (RBAC, API errors): say so rather than wait in silence
      return w.informer.failures > 0
        ? { configMap: null, error: apiMessage(w.informer.lastError) }
        : undefined;
    return { configMap: w.informer.get(namespace, name) ?? null };
  }

  stop(): Promise<void> {
    const all = [...this.watched.values()].map((w) => w.informer.stop());
    this.watched.clear();
    this.named.clear();
    return Promise.all(all).then(() => undefined);
  }
}

/** The contract spec.contract names (not yet checked: compileContract does that). */
export function resolveContract(
  spec: WorkerPoolSpec,
  namespace: string,
  configMaps: ConfigMapWatch,
): ResolvedContract | undefined {
  const c = spec.contract;
  if (!c) return undefined;
  const ref = c.configMapRef;
  if (!ref) {
    const { configMapRef: _none, ...inline } = c;
    return { contract: inline as Contract, source: "inline" };
  }
  const key = ref.key ?? "contract.json";
  const source = `configmap/${ref.name}`;
  const seen = configMaps.get(namespace, ref.name);
  if (!seen) return { pending: true };
  if (seen.error)
    return {
      problem: {
        reason: Reason.ContractNotFound,
        message: `cannot read ConfigMap ${ref.name} (spec.contract.configMapRef): ${seen.error}`,
      },
    };
  if (!seen.configMap)
    return {
      problem: {
        reason: Reason.ContractNotFound,
        message: `ConfigMap ${ref.name} (spec.contract.configMapRef) not found in namespace ${namespace}`,
      },
    };
  const text = seen.configMap.data?.[key];
  if (text === undefined)
    return {
      problem: {
        reason: Reason.ContractNotFound,
        message: `ConfigMap ${ref.name} has no key ${JSON.stringify(key)} (spec.contract.configMapRef)`,
      },
    };
  try {
    // YAML 1.2 reads JSON too
    return { contract: parseYaml(text) as unknown, source };
  } catch (err) {
    return {
      problem: {
        reason: Reason.ContractInvalid,
        message: `ConfigMap ${ref.name} key ${JSON.stringify(key)}: neither JSON nor YAML: ${(err as Error).message.split("\n")[0]}`,
      },
    };
  }
}
