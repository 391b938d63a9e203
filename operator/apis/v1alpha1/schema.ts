// The WorkerPool API (conveyor.dev/v1alpha1) — the ONE source of truth. The CRD in
// crds/conveyor.dev_workerpools.yaml is generated from this file and the areas of the spec in
// ./schema/ (scaling, resources, contract, template, rollout, status) by `npm run gen:crds`, the
// TypeScript types in ./types.ts are derived from it, and so are the defaults the operator
// applies. Change the API here, then regenerate; operator/apis/v1alpha1/workerPool.test.ts fails on a stale CRD.
import { PYTHON_CALLABLE_PATTERN } from "../../../lib/pythonCallable.ts";
import { EXACTLY_ONE_HANDLER, HANDLER_KINDS, MAX_BATCH_SIZE } from "../../../lib/workerContract.ts";
import { QUEUE_NAME_PATTERN } from "../../../queue/keyTable.ts";
import type { JSONSchemaProps } from "../jsonschema.ts";
import { contractSchema } from "./schema/contract.ts";
import { notifySchema } from "./schema/notify.ts";
import { resourcesSchema } from "./schema/resources.ts";
import { rolloutSchema } from "./schema/rollout.ts";
import { scalingSchema } from "./schema/scaling.ts";
import { statusSchema } from "./schema/status.ts";
import { templateSchema } from "./schema/template.ts";

export const GROUP = "conveyor.dev";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = "WorkerPool";
export const PLURAL = "workerpools";
export const SINGULAR = "workerpool";
export const SHORT_NAMES = ["wp"] as const;

/** The queue-name grammar (queue/keyTable.ts), for the CRD schema. */
export { QUEUE_NAME_PATTERN };
export { RESOURCE_LIMIT_PATTERN, RESOURCE_NAME_PATTERN } from "./schema/resources.ts";
export { RESERVED_ENV, RESERVED_ENV_PREFIX, WORKER_CONTAINER } from "./schema/template.ts";
export { RECENT_DECISIONS, statusSchema } from "./schema/status.ts";

const secretKeyRef = (what: string, defaultKey: string) =>
  ({
    type: "object",
    description: `A key of a Secret in the pool's namespace holding ${what}.`,
    required: ["name"],
    properties: {
      name: { type: "string", minLength: 1, maxLength: 253, description: "Name of the Secret." },
      key: {
        type: "string",
        minLength: 1,
        maxLength: 253,
        default: defaultKey,
        description: `Key in the Secret (default "${defaultKey}").`,
      },
    },
  }) as const;

export const specSchema = {
  type: "object",
  description: "A pool of generic workers consuming one queue, scaled on its backlog.",
  required: ["queue", "redis", "handler"],
  "x-kubernetes-validations": [
    {
      rule: "!has(self.nextQueue) || self.nextQueue.split('/')[0] == self.queue.split('/')[0]",
      message:
        "nextQueue must be a stage of the same pipeline as queue (share the 'pipeline/' prefix, e.g. docs/ocr -> docs/embed)",
      fieldPath: ".nextQueue",
    },
    {
      rule: "!has(self.nextQueue) || self.nextQueue != self.queue",
      message: "nextQueue must differ from queue",
      fieldPath: ".nextQueue",
    },
  ],
  properties: {
    queue: {
      type: "string",
      pattern: QUEUE_NAME_PATTERN,
      maxLength: 201,
      description: "The queue this pool consumes: 'stage' or 'pipeline/stage'.",
    },
    nextQueue: {
      type: "string",
      pattern: QUEUE_NAME_PATTERN,
      maxLength: 201,
      description:
        "Optional next stage: a job's result is enqueued there atomically when it completes. Same pipeline as queue.",
    },
    redis: {
      type: "object",
      required: ["url"],
      description: "Where the queue lives. Credentials only through secretRef.",
      properties: {
        url: {
          type: "string",
          minLength: 1,
          maxLength: 2048,
          pattern: "^(redis|rediss|redis-cluster|redis-sentinel)://",
          description:
            "redis://host:port[/db], rediss://host:port (TLS), redis-cluster://host:port,host:port or redis-sentinel://sentinel:port,sentinel:port/<master-name>[?sentinelAuth=same]. No password here.",
          "x-kubernetes-validations": [
            {
              rule: "!self.matches('^[a-z-]+://[^/@]*:[^/@]*@')",
              message: "redis.url must not contain a password: put it in a Secret and set redis.secretRef",
            },
          ],
        },
        secretRef: secretKeyRef("the Redis password", "password"),
        tls: { type: "boolean", default: false, description: "Connect with TLS (same as a rediss:// URL)." },
        durability: {
          type: "string",
          enum: ["primary", "replicated"],
          description:
            "primary (unset): a settle is acknowledged once the primary applied it. replicated: also once a replica has it (WAIT 1), so a failover cannot undo it (docs/reliability.md).",
        },
      },
    },
    database: {
      type: "object",
      description: "Optional PostgreSQL for durable job records (the worker's DATABASE_URL).",
      required: ["secretRef"],
      properties: { secretRef: secretKeyRef("the PostgreSQL connection URL", "url") },
    },
    handler: {
      type: "object",
      description: `What runs a job: ${EXACTLY_ONE_HANDLER}.`,
      "x-kubernetes-validations": [
        {
          rule: `[${HANDLER_KINDS.map((k) => `has(self.${k})`).join(", ")}].filter(x, x).size() == 1`,
          message: `handler must set ${EXACTLY_ONE_HANDLER}`,
        },
        {
          rule: "!has(self.passCredentials) || has(self.command) || has(self.python)",
          message: "handler.passCredentials applies to a command or python handler only",
        },
      ],
      properties: {
        module: {
          type: "string",
          pattern: "^/",
          maxLength: 4096,
          description: "Absolute path (in the image) of an ES module exporting `async (job, ctx) => result`.",
        },
        http: {
          type: "object",
          required: ["port"],
          description: "POST each job to a sidecar on localhost (declare it in template.containers).",
          properties: {
            port: { type: "integer", minimum: 1, maximum: 65535 },
            path: { type: "string", pattern: "^/", maxLength: 2048, default: "/" },
          },
        },
        command: {
          type: "array",
          minItems: 1,
          maxItems: 256,
          "x-kubernetes-list-type": "atomic",
          description: "argv of a program run per job (JSON on stdin, JSON result on stdout; no shell).",
          items: { type: "string", maxLength: 4096 },
        },
        python: {
          type: "object",
          required: ["callable"],
          description:
            "Run a Python function in one long-lived Python process the worker starts and supervises (the handler kit over stdin/stdout; restarted if it dies). The pool's image defaults to the operator's --python-worker-image (conveyor-worker-python).",
          properties: {
            callable: {
              type: "string",
              pattern: PYTHON_CALLABLE_PATTERN,
              maxLength: 1024,
              description:
                "module.path:function, imported from the worker's working directory or the image's Python path; called as fn(job, ctx) per job.",
            },
          },
        },
        passCredentials: {
          type: "boolean",
          description:
            "The command's (or Python process's) environment keeps the worker's REDIS_URL, REDIS_PASSWORD and DATABASE_URL (by default it gets the pod's environment without them).",
        },
      },
    },
    concurrency: {
      type: "integer",
      minimum: 1,
      maximum: 1000,
      default: 1,
      description:
        "Handler calls run at once by one worker pod: jobs, or with batch, batch calls of up to batch.size jobs each (a pod then holds concurrency × batch.size jobs, and the pool is sized by that).",
    },
    batch: {
      type: "object",
      description:
        "Batch calls (docs/batches.md): the handler gets up to size jobs in one call, once minSize are claimed or waitMs passed since the first; it answers one outcome per job. The handler must take batches: a module exporting batch, http, command, or a python function marked @batch.",
      required: ["size"],
      "x-kubernetes-validations": [
        {
          rule: "!has(self.minSize) || self.minSize <= self.size",
          message: "batch.minSize must be <= batch.size",
          fieldPath: ".minSize",
        },
        {
          rule: "!has(self.minSize) || self.minSize <= 1 || (has(self.waitMs) && self.waitMs > 0)",
          message: "batch.minSize above 1 needs waitMs (how long a claimed job may wait for the others)",
          fieldPath: ".waitMs",
        },
      ],
      properties: {
        size: {
          type: "integer",
          minimum: 1,
          maximum: MAX_BATCH_SIZE,
          description: "The most jobs in one handler call.",
        },
        minSize: {
          type: "integer",
          minimum: 1,
          maximum: MAX_BATCH_SIZE,
          description: "A call starts once this many jobs are claimed (default 1), or waitMs passed.",
        },
        waitMs: {
          type: "integer",
          minimum: 0,
          maximum: 3600000,
          description:
            "The longest a claimed job waits for minSize others before its call starts anyway (default 0).",
        },
      },
    },
    notify: notifySchema,
    maxJobSeconds: {
      type: "integer",
      minimum: 1,
      maximum: 86400,
      default: 300,
      description: "A job's timeout: the handler is aborted after it.",
    },
    drainSeconds: {
      type: "integer",
      minimum: 0,
      maximum: 86400,
      description:
        "How long a stopping worker lets running jobs finish before handing them back (default: maxJobSeconds). The pod's terminationGracePeriodSeconds is this plus 10 s.",
    },
    paused: {
      type: "boolean",
      description:
        "Pause the queue: no worker claims from it (running jobs finish, enqueues wait). The pool scales to what its running jobs need (ceil(inflight / concurrency); no fewer than the pods running them while a job may outlast drainSeconds), then to minReplicas. While set (true or false) it wins over `conveyor pause/resume`; unset leaves the queue as the CLI set it.",
    },
    rateLimit: {
      type: "string",
      pattern: "^[1-9][0-9]{0,5}/(s|m|h)$",
      description:
        "A global rate limit on the queue: at most N job starts per second, minute or hour across all workers (e.g. 50/s), enforced by the claim script. The pool is capped at the replicas the rate can feed: ceil(rate × job seconds / concurrency) + 1 (the mean run time of the jobs that ended in the last minute, the workers' median before any has), never above maxReplicas. While set it wins over `conveyor limit`.",
    },
    resources: resourcesSchema,
    replicas: {
      type: "integer",
      minimum: 0,
      maximum: 10000,
      description:
        "A fixed replica count. Normally unset: the pool autoscales. Set by `kubectl scale wp/<name>` (the scale subresource) or an external autoscaler targeting the WorkerPool; while set, the operator's autoscaling is off.",
    },
    template: templateSchema,
    contract: contractSchema,
    scaling: scalingSchema,
    upgrade: {
      type: "object",
      default: {},
      description: "Upgrades of Conveyor itself (docs/install.md, Upgrading).",
      properties: {
        autoFinalize: {
          type: "boolean",
          default: true,
          description:
            "Move the pipeline's layout in force forward (`conveyor layout finalize`) once every pod of every pool of the pipeline runs a version that reads the newer layout, with an Event LayoutFinalized. Off: a person runs `conveyor layout finalize`. Any pool of the pipeline with it off, or at zero pods, holds the pipeline's finalize.",
        },
      },
    },
    rollout: rolloutSchema,
  },
} as const satisfies JSONSchemaProps;

export const workerPoolSchema = {
  type: "object",
  required: ["spec"],
  "x-kubernetes-validations": [
    {
      rule: "self.metadata.name.size() <= 63",
      message: "a WorkerPool name must be at most 63 characters (it is a label value of its pods)",
    },
  ],
  properties: {
    apiVersion: { type: "string" },
    kind: { type: "string" },
    metadata: { type: "object" },
    spec: specSchema,
    status: statusSchema,
  },
} as const satisfies JSONSchemaProps;

/** `kubectl get wp` columns. */
export const printerColumns = [
  { name: "Queue", type: "string", jsonPath: ".spec.queue" },
  { name: "Backlog", type: "integer", jsonPath: ".status.backlog" },
  { name: "In-Flight", type: "integer", jsonPath: ".status.inflight" },
  {
    name: "Replicas",
    type: "string",
    jsonPath: ".status.readyOfDesired",
    description: "ready/desired worker pods",
  },
  { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
  {
    name: "Control",
    type: "string",
    jsonPath: ".status.control.summary",
    description: "queue paused, rate-limited or budget-capped (and the replica cap)",
  },
  {
    name: "Rollout",
    type: "string",
    jsonPath: ".status.rollout.summary",
    description: "the canary rollout: step and weight, or how the last one ended",
  },
  { name: "Mode", type: "string", jsonPath: ".spec.scaling.mode", priority: 1 },
  {
    name: "Oldest",
    type: "date",
    jsonPath: ".status.oldestReadySince",
    description: "age of the oldest waiting job",
    priority: 1,
  },
  { name: "Min", type: "integer", jsonPath: ".spec.scaling.minReplicas", priority: 1 },
  { name: "Max", type: "integer", jsonPath: ".spec.scaling.maxReplicas", priority: 1 },
  { name: "Last-Decision", type: "string", jsonPath: ".status.lastDecision.reason", priority: 1 },
  {
    name: "Contract",
    type: "string",
    jsonPath: ".status.contract.hash",
    description: "hash of the contract the operator published (spec.contract)",
    priority: 1,
  },
  { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
] as const;
