// Kubernetes Events on WorkerPools (core/v1, what `kubectl describe wp` shows). Events are
// emitted for scale decisions and for transitions into an error state — never per reconcile —
// so an idle operator writes none. A failure to record one is logged, never fatal.
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { RESOURCES, apiVersionOf, resourcePath } from "../apis/coordinates.ts";
import type { KubeClient } from "../kube/client.ts";
import type { EventReason } from "./reasons.ts";

export interface EventTarget {
  metadata: { name: string; namespace: string; uid: string; resourceVersion?: string };
}

export class EventRecorder {
  private readonly client: KubeClient;
  private readonly identity: string;
  private readonly log?: Logger;

  constructor(client: KubeClient, identity: string, log?: Logger) {
    this.client = client;
    this.identity = identity;
    this.log = log;
  }

  async record(
    pool: EventTarget,
    type: "Normal" | "Warning",
    reason: EventReason,
    message: string,
  ): Promise<void> {
    const now = new Date().toISOString();
    const name = `${pool.metadata.name}.${Date.now().toString(16)}${randomBytes(2).toString("hex")}`;
    try {
      await this.client.create(resourcePath(RESOURCES.events, { namespace: pool.metadata.namespace }), {
        apiVersion: apiVersionOf(RESOURCES.events),
        kind: RESOURCES.events.kind,
        metadata: { name, namespace: pool.metadata.namespace },
        involvedObject: {
          apiVersion: apiVersionOf(RESOURCES.workerPools),
          kind: RESOURCES.workerPools.kind,
          name: pool.metadata.name,
          namespace: pool.metadata.namespace,
          uid: pool.metadata.uid,
          resourceVersion: pool.metadata.resourceVersion,
        },
        type,
        reason,
        message: message.slice(0, 1024),
        source: { component: "conveyor-operator" },
        reportingComponent: "conveyor.dev/operator",
        reportingInstance: this.identity.slice(0, 128),
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      });
    } catch (err) {
      this.log?.warn(
        { err: String(err), pool: `${pool.metadata.namespace}/${pool.metadata.name}`, reason },
        "could not record an event",
      );
    }
  }
}
