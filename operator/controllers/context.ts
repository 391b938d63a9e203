// What every reconcile step gets: the (leader-gated) client, the read-your-writes overlays, the
// pool's in-memory state, and ways to observe pods and worker reports. Shared types only: this
// file imports leaf files (objects, reasons, overlay, events), never the steps that use it.
import type { Logger } from "pino";
import type { WorkerReport } from "../../queue/index.ts";
import type { WorkerPool } from "../apis/v1alpha1/types.ts";
import type { KubeClient } from "../kube/client.ts";
import type { OperatorMetrics } from "../metrics.ts";
import type { HpaAlgorithm } from "../scaling/hpaAlgorithm.ts";
import type { ArrivalEstimate, ServiceEstimate } from "../scaling/latency.ts";
import type { EventRecorder } from "./events.ts";
import type { Deployment, HPA, Pod } from "./objects.ts";
import type { WriteOverlay } from "./overlay.ts";
import type { ScaleReason } from "./reasons.ts";

export interface ReconcileContext {
  client: KubeClient;
  log: Logger;
  metrics: OperatorMetrics;
  events: EventRecorder;
  defaultImage: string;
  /** The image of pools with a python handler that name none. */
  defaultPythonImage?: string;
  workerOutboxMaxBytes?: number;
  poolOverlay: WriteOverlay<WorkerPool>;
  deploymentOverlay: WriteOverlay<Deployment>;
  hpaOverlay: WriteOverlay<HPA>;
  /** HPAs this replica deleted recently (uid → when), so a lagging cache does not delete twice. */
  deletedHPAs: Map<string, number>;
  /** The pool's pods (informer cache), not terminating. */
  podsOf: (pool: WorkerPool) => Pod[];
  /** The workers' busy/idle reports of the pool's queue. */
  workerReports: (key: string) => Promise<WorkerReport[]>;
}

export interface PoolScaler {
  /** Last time the queue had backlog or jobs in flight (starts at creation: a new leader waits a full cooldown). */
  lastActiveAt: number;
  hpa: HpaAlgorithm;
  /** Latency mode: the arrival rate from the enqueue counter's growth between polls. */
  arrivals?: ArrivalEstimate;
  /** Latency mode: the last median job duration the workers reported (ms), kept while no worker runs. */
  jobMs?: number;
  /** The mean time a job holds a slot, from the queue's attempts-ended counters (latency mode, the start-rate caps). */
  service?: ServiceEstimate;
  /** Latency mode: the last median pod start-up (creation → Ready, ms), kept while no pod runs. */
  podStartMs?: number;
  /** A scale-in held at the pods running jobs (holdForBusyPods): since when, at what, and why. */
  scaleInHold?: {
    since: number;
    /** The fewest pods this hold has wanted: wanting fewer starts its time limit again. */
    fewest: number;
    replicas: number;
    wanted: number;
    busyPods: number;
    message: string;
  };
}

/** The last replica change and why (status.lastDecision): the operator's own, or the HPA's it observed. */
export interface LastDecision {
  replicas: number;
  from: number;
  reason: ScaleReason;
  message: string;
  at: string;
  /** The backlog it was made at, when read. */
  backlog?: number;
}

/** What the operator remembers about a pool between reconciles (in memory; rebuilt after a restart). */
export interface PoolState {
  scaler: PoolScaler;
  lastDecision?: LastDecision;
  /** Problem reasons already announced by an Event. */
  announced?: Set<string>;
  /** The replica count as of the last pass (after our own write, if any): a change since is the HPA's. */
  seenReplicas?: number;
  /** Our last scale write, trusted over an older cache. */
  expect?: { replicas: number; until: number };
  /** Deletion costs we wrote recently (pod → value), to not rewrite before the cache shows them. */
  costsWritten: Map<string, { value: string; at: number }>;
  /** The pods we cordoned (podsToCordon) and until when (ms), as last written to Redis. */
  cordon?: { pods: string[]; until: number };
  /** The pipeline whose job records this process saw on (switchRecordsOn), so it asks once. */
  recordsOn?: string;
  /** The last contract compiled (publishContract), by hash: a contract compiles once, not per pass. */
  contractChecked?: { hash: string; error?: string };
  /** When the layout step last looked at the pipeline's layout (finalizeLayoutStep), and what it decided. */
  layoutCheckedAt?: number;
  layoutWaiting?: string;
}
