// What every route handler reaches: the queue API, the optional PostgreSQL records and
// Kubernetes reader, the event hub and the auth policy. Built once by startJobApi.
import type { Logger } from "pino";
import type { Producer, QueueAdmin, RedisClient } from "../queue/index.ts";
import type { AuditLog } from "./audit.ts";
import type { Auth } from "./auth.ts";
import type { EventHub } from "./eventHub.ts";
import { HttpError } from "./http.ts";
import type { QueueDirectory } from "./queueDirectory.ts";
import type { ApiMetrics } from "./metrics.ts";
import type { JobRecords } from "./records.ts";
import type { RecordsSwitch } from "./recordsSwitch.ts";
import type { ResourceHistory } from "./resourceHistory.ts";
import type { RolloutHistory } from "./rolloutHistory.ts";

/** WorkerPools for the Pools page (operator/poolReader.ts reads them from Kubernetes). */
export interface PoolSource {
  list(allowed: (queue: string) => boolean): Promise<unknown[]>;
  /** null when absent or its queue is not allowed. */
  detail(namespace: string, name: string, allowed: (queue: string) => boolean): Promise<unknown | null>;
}

export interface ApiContext {
  redis: RedisClient;
  admin: QueueAdmin;
  producer: Producer;
  auth: Auth;
  directory: QueueDirectory;
  hub: EventHub;
  metrics: ApiMetrics;
  records: JobRecords | null;
  /** With records: switches them on for a pipeline before the API's first enqueue into it. */
  recordsSwitch: RecordsSwitch | null;
  pools: PoolSource | null;
  /** The resources' last hour (null: not sampled by this server). */
  resourceHistory: ResourceHistory | null;
  /** The canary rollouts' samples (null: no pools, or not sampled by this server). */
  rolloutHistory: RolloutHistory | null;
  /** Where every state change through the API is recorded (api/audit.ts). */
  audit: AuditLog;
  log?: Logger;
}

export function requireRecords(ctx: ApiContext): JobRecords {
  if (!ctx.records)
    throw new HttpError(503, "job history needs PostgreSQL: start with --database / DATABASE_URL");
  return ctx.records;
}
