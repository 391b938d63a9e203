// The pass: what one reconcile of one pool has found so far, read and added to by each step of
// workerpoolReconciler.ts, and what the steps that live apart from it (queue control, records,
// the contract) are given.
import type { QueueCounts } from "../../queue/index.ts";
import type { WorkerPool, WorkerPoolSpec, WorkerPoolStatus } from "../apis/v1alpha1/types.ts";
import type { Result } from "../kube/result.ts";
import type { BacklogPoller, BacklogSample } from "../scaling/backlog.ts";
import type { ScaleInput, ScaleObservation } from "../scaling/scaler.ts";
import type { ConfigMapWatch } from "./contractSource.ts";
import type { PoolState, ReconcileContext } from "./context.ts";
import type { Deployment, HPA } from "./objects.ts";
import type { PoolGauges } from "./poolGauges.ts";
import type { EventReason, Problem } from "./reasons.ts";

/** What the steps apart from the reconciler use: the reconcile's context, the poll, the gauges, the ConfigMaps watched. */
export interface StepDeps {
  ctx: ReconcileContext;
  poller: BacklogPoller;
  gauges: PoolGauges;
  configMaps: ConfigMapWatch;
}

/** What one reconcile of one pool has found so far. */
export interface PoolPass {
  key: string;
  pool: WorkerPool;
  state: PoolState;
  /** The spec with defaults; undefined when invalid (an InvalidSpec problem says why). */
  spec?: WorkerPoolSpec;
  problems: Problem[];
  result: Result;
  /** When the backlog was looked at: the clock of every decision in this pass. */
  now: number;
  sample?: BacklogSample;
  /** The sample's last good reading is recent enough to act on. */
  backlogFresh: boolean;
  /** That reading's counts and when they were read, when fresh. */
  counts?: QueueCounts;
  countsAt?: number;
  /** The workers' median job duration (ms) from the sample's reports, when any. */
  jobMs?: number;
  deployment?: Deployment;
  hpa?: HPA;
  /** The Deployment is ours and was applied: the HPA and the scale may follow. */
  ownsDeployment: boolean;
  /** The binding queue-control cap below spec.scaling.maxReplicas, when one binds. */
  replicaCap?: number;
  /** Queue control in force (status.control); `queuePaused` drives scaling. */
  control?: NonNullable<WorkerPoolStatus["control"]>;
  queuePaused: boolean;
  /** The counts were read with the pause in force (BacklogSample.pausedWhenCounted). */
  pauseSeenByPoll: boolean;
  /** status.contract as this pass leaves it: null none, undefined as stored. */
  contract?: WorkerPoolStatus["contract"] | null;
  /** The canary Deployment while a rollout is in progress. */
  canary?: Deployment;
  /**
   * During a rollout scaling sizes: the stable Deployment as the scaling step saw it, with the
   * canary's replicas added (the pool's total); the split step divides what scaling decided.
   */
  scaleView?: Deployment;
  /** The rollout's Events of this pass, recorded after its status write. */
  rolloutEvents?: { type: "Normal" | "Warning"; reason: EventReason; message: string }[];
  /** status.rollout as this pass leaves it: null none, undefined as stored. */
  rollout?: WorkerPoolStatus["rollout"] | null;
  /** What scaling reads of this pass (our Deployment applied), and what it observed of the pods. */
  scale?: ScaleInput;
  seen?: ScaleObservation;
}

/** The most replicas scaling goes to this pass (a valid spec): the spec's, or the binding cap below it. */
export function maxReplicasOf(pass: PoolPass): number {
  return pass.replicaCap ?? pass.spec!.scaling.maxReplicas;
}
