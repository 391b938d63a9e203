// Objects the controllers' unit tests build their cases from (not part of the build output).
import type { QueueCounts } from "../../queue/index.ts";
import { withDefaults, type WorkerPool } from "../apis/v1alpha1/types.ts";

/** A WorkerPool in namespace `jobs` with the spec's defaults filled in. */
export function pool(spec: Parameters<typeof withDefaults>[0], name = "ocr"): WorkerPool {
  return {
    apiVersion: "conveyor.dev/v1alpha1",
    kind: "WorkerPool",
    metadata: { name, namespace: "jobs", uid: "uid-1", generation: 1 },
    spec: withDefaults(spec),
  };
}

/** Queue counts with `backlog` jobs of which `inflight` are running. */
export const counts = (backlog: number, inflight = 0): QueueCounts => ({
  ready: backlog - inflight,
  delayed: 0,
  dueDelayed: 0,
  inflight,
  dead: 0,
  completed: 0,
  backlog,
});
