// The WorkerPool API (conveyor.dev/v1alpha1) — the ONE source of truth. The CRD in
// crds/conveyor.dev_workerpools.yaml is generated from this file (`npm run gen:crds`), the
// TypeScript types in ./types.ts are derived from it, and so are the defaults the operator
// applies. Change the API here, then regenerate; operator/apis/v1alpha1/workerPool.test.ts fails on a stale CRD.
import type {
  V1Affinity,
  V1Container,
  V1EnvFromSource,
  V1EnvVar,
  V1LocalObjectReference,
  V1PodSecurityContext,
  V1ResourceRequirements,
  V1Toleration,
  V1TopologySpreadConstraint,
  V1Volume,
  V1VolumeMount,
} from "@kubernetes/client-node";
import { PYTHON_CALLABLE_PATTERN } from "../../../lib/pythonCallable.ts";
import { EXACTLY_ONE_HANDLER, HANDLER_KINDS, WORKER_ENV } from "../../../lib/workerContract.ts";
import { QUEUE_NAME_PATTERN } from "../../../queue/keyTable.ts";
import { typed, type JSONSchemaProps } from "../jsonschema.ts";

export const GROUP = "conveyor.dev";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = "WorkerPool";
export const PLURAL = "workerpools";
export const SINGULAR = "workerpool";
export const SHORT_NAMES = ["wp"] as const;

/** The queue-name grammar (queue/keyTable.ts), for the CRD schema. */
export { QUEUE_NAME_PATTERN };

/**
 * spec.resources: a resource's name or a key's id (also a Secret key), and a limit
 * `<unit>=<max>/<window>` — the grammar of queue/resources.ts; a unit test keeps them equal.
 */
export const RESOURCE_NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$";
export const RESOURCE_LIMIT_PATTERN = "^[a-z][a-z0-9_]{0,31}=[0-9]{1,13}/[0-9]{0,8}(ms|s|m|h)$";

/** Environment variables the operator sets on the worker container; `template.env` may not set them. */
export const RESERVED_ENV = [
  WORKER_ENV.redisUrl,
  WORKER_ENV.redisPassword,
  WORKER_ENV.databaseUrl,
  WORKER_ENV.podName,
] as const;
export const RESERVED_ENV_PREFIX = "CONVEYOR_";
/** The worker container's name in the pod; sidecars may not take it. */
export const WORKER_CONTAINER = "worker";

const reservedEnvList = `[${RESERVED_ENV.map((n) => `'${n}'`).join(", ")}]`;

/** A free-form Kubernetes object (validated by the API server when the Deployment is applied). */
const k8sObject = { type: "object", "x-kubernetes-preserve-unknown-fields": true } as const;

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

/** A JSON Schema inside spec.contract: free-form (checked by the operator when it compiles the contract). */
const contractSchema = (what: string) =>
  ({
    type: "object",
    "x-kubernetes-preserve-unknown-fields": true,
    description: `JSON Schema of ${what}.`,
  }) as const;

const scalingRules = (direction: "up" | "down") =>
  ({
    type: "object",
    description: `How fast the pool may scale ${direction} (autoscaling/v2 HPAScalingRules, passed to the HPA; \`direct\` mode applies the same rules).`,
    properties: {
      stabilizationWindowSeconds: {
        type: "integer",
        minimum: 0,
        maximum: 3600,
        description: `Recommendations of the last N seconds are considered and the ${direction === "up" ? "lowest" : "highest"} is used (HPA default: ${direction === "up" ? 0 : 300}).`,
      },
      selectPolicy: {
        type: "string",
        enum: ["Max", "Min", "Disabled"],
        description: "Which policy wins when several apply (HPA default: Max).",
      },
      policies: {
        type: "array",
        maxItems: 10,
        "x-kubernetes-list-type": "atomic",
        description: "Limits on the change per period.",
        items: {
          type: "object",
          required: ["type", "value", "periodSeconds"],
          properties: {
            type: { type: "string", enum: ["Pods", "Percent"] },
            value: { type: "integer", minimum: 1 },
            periodSeconds: { type: "integer", minimum: 1, maximum: 1800 },
          },
        },
      },
    },
  }) as const;

const condition = {
  type: "object",
  required: ["type", "status", "lastTransitionTime", "reason", "message"],
  properties: {
    type: { type: "string", maxLength: 316, description: "Ready, ScalingActive or Degraded." },
    status: { type: "string", enum: ["True", "False", "Unknown"] },
    observedGeneration: { type: "integer", format: "int64", minimum: 0 },
    lastTransitionTime: { type: "string", format: "date-time" },
    reason: {
      type: "string",
      maxLength: 1024,
      minLength: 1,
      pattern: "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
    },
    message: { type: "string", maxLength: 32768 },
  },
} as const;

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
          maximum: 10000,
          description: "The most jobs in one handler call.",
        },
        minSize: {
          type: "integer",
          minimum: 1,
          maximum: 10000,
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
    resources: {
      type: "array",
      maxItems: 20,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["name"],
      description:
        "Budgets of rate-limited APIs the pool's jobs use (docs/budgets.md): each a named set of keys with limits per window. The operator writes the key ids and limits (never a credential) into the pipeline's Redis when they differ, and mounts the Secret's key of each id into the worker at /var/run/conveyor/resources/<name>/<id>. The pool is capped at the replicas the keys' request rate can feed.",
      items: {
        type: "object",
        required: ["name", "keys"],
        properties: {
          name: {
            type: "string",
            pattern: RESOURCE_NAME_PATTERN,
            description: "The resource's name, as jobs name it in `uses` (e.g. openai).",
          },
          ceiling: {
            type: "integer",
            minimum: 1,
            maximum: 100,
            description:
              "Admit a job only while a key's usage stays at or below this percentage of each limit (default 90).",
          },
          secretRef: {
            type: "object",
            required: ["name"],
            description:
              "A Secret in the pool's namespace holding each key's credential under the key's id; mounted read-only into the worker container (the operator never reads it).",
            properties: {
              name: { type: "string", minLength: 1, maxLength: 253, description: "Name of the Secret." },
            },
          },
          keys: {
            type: "array",
            minItems: 1,
            maxItems: 100,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["id"],
            items: {
              type: "object",
              required: ["id", "limits"],
              properties: {
                id: {
                  type: "string",
                  pattern: RESOURCE_NAME_PATTERN,
                  description: "The key's id (also its key in secretRef's Secret).",
                },
                limits: {
                  type: "array",
                  minItems: 1,
                  maxItems: 10,
                  "x-kubernetes-list-type": "atomic",
                  description:
                    "`<unit>=<max>/<window>`, the window s, m, h (or 2s, 500ms): requests=60/m (each job is one request), tokens=200000/m (what jobs declare in `uses`).",
                  items: { type: "string", maxLength: 64, pattern: RESOURCE_LIMIT_PATTERN },
                },
              },
            },
          },
        },
      },
    },
    replicas: {
      type: "integer",
      minimum: 0,
      maximum: 10000,
      description:
        "A fixed replica count. Normally unset: the pool autoscales. Set by `kubectl scale wp/<name>` (the scale subresource) or an external autoscaler targeting the WorkerPool; while set, the operator's autoscaling is off.",
    },
    template: {
      type: "object",
      default: {},
      description: "Merged into the worker Deployment's pod template.",
      properties: {
        image: {
          type: "string",
          minLength: 1,
          maxLength: 1024,
          description:
            "Worker image (default: the operator's --worker-image; for a python handler its --python-worker-image).",
        },
        imagePullPolicy: { type: "string", enum: ["Always", "IfNotPresent", "Never"] },
        imagePullSecrets: typed<V1LocalObjectReference[]>()({
          type: "array",
          "x-kubernetes-list-type": "atomic",
          items: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
        }),
        labels: {
          type: "object",
          additionalProperties: { type: "string" },
          description: "Extra pod labels.",
        },
        annotations: {
          type: "object",
          additionalProperties: { type: "string" },
          description: "Extra pod annotations.",
        },
        env: typed<V1EnvVar[]>()({
          type: "array",
          maxItems: 200,
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["name"],
          description: `Extra environment of the worker container. ${RESERVED_ENV.join(", ")} and ${RESERVED_ENV_PREFIX}* are set by the operator.`,
          items: { ...k8sObject, required: ["name"], properties: { name: { type: "string", minLength: 1 } } },
          "x-kubernetes-validations": [
            {
              rule: `self.all(e, !(e.name in ${reservedEnvList}) && !e.name.startsWith('${RESERVED_ENV_PREFIX}'))`,
              message: `template.env may not set ${RESERVED_ENV.join(", ")} or ${RESERVED_ENV_PREFIX}* (the operator sets them from the spec)`,
            },
          ],
        }),
        envFrom: typed<V1EnvFromSource[]>()({
          type: "array",
          "x-kubernetes-list-type": "atomic",
          items: k8sObject,
        }),
        resources: typed<V1ResourceRequirements>()({
          ...k8sObject,
          description: "Requests and limits of the worker container.",
        }),
        volumeMounts: typed<V1VolumeMount[]>()({
          type: "array",
          "x-kubernetes-list-type": "atomic",
          description: "Extra mounts of the worker container (/tmp is always a writable emptyDir).",
          items: k8sObject,
        }),
        volumes: typed<V1Volume[]>()({ type: "array", "x-kubernetes-list-type": "atomic", items: k8sObject }),
        containers: typed<V1Container[]>()({
          type: "array",
          maxItems: 20,
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["name"],
          description: "Sidecar containers (e.g. the server of an http handler).",
          items: { ...k8sObject, required: ["name"], properties: { name: { type: "string", minLength: 1 } } },
          "x-kubernetes-validations": [
            {
              rule: `self.all(c, c.name != '${WORKER_CONTAINER}')`,
              message: `a sidecar may not be named '${WORKER_CONTAINER}'`,
            },
          ],
        }),
        nodeSelector: { type: "object", additionalProperties: { type: "string" } },
        tolerations: typed<V1Toleration[]>()({
          type: "array",
          "x-kubernetes-list-type": "atomic",
          items: k8sObject,
        }),
        affinity: typed<V1Affinity>()(k8sObject),
        topologySpreadConstraints: typed<V1TopologySpreadConstraint[]>()({
          type: "array",
          "x-kubernetes-list-type": "atomic",
          items: k8sObject,
        }),
        serviceAccountName: {
          type: "string",
          maxLength: 253,
          description: "Default: none, and no API token is mounted.",
        },
        priorityClassName: { type: "string", maxLength: 253 },
        securityContext: typed<V1PodSecurityContext>()({
          ...k8sObject,
          description: "Pod security context (default: non-root uid 65532, seccomp RuntimeDefault).",
        }),
      },
    },
    contract: {
      type: "object",
      description:
        "The stage's contract (docs/contracts.md): JSON Schemas (draft 2020-12, or draft-07 by $schema) for its job data and results, for untasked jobs and per named task — inline, or from a ConfigMap. The operator checks it and publishes it to the queue's Redis (`<queue>contract`, source operator:<namespace>/<pool>) when its hash differs from the one in force: while set it wins over `conveyor contract set`. Removing it deletes the queue's contract if this pool published it. Jobs already waiting are not re-checked.",
      "x-kubernetes-validations": [
        {
          rule: "[has(self.data) || has(self.result) || has(self.tasks), has(self.configMapRef)].filter(x, x).size() == 1",
          message: "contract must set either data/result/tasks inline or configMapRef (exactly one)",
        },
      ],
      properties: {
        data: contractSchema("job data (untasked jobs)"),
        result: contractSchema("results (untasked jobs)"),
        tasks: {
          type: "object",
          maxProperties: 100,
          description:
            "Per named task (the job's `task`; names match ^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$): its data and result schemas.",
          additionalProperties: {
            type: "object",
            properties: {
              data: contractSchema("the task's job data"),
              result: contractSchema("the task's results"),
            },
          },
        },
        configMapRef: {
          type: "object",
          required: ["name"],
          description:
            "A ConfigMap in the pool's namespace whose key holds the contract ({data, result, tasks}) as JSON or YAML. The operator watches it and publishes each change.",
          properties: {
            name: { type: "string", minLength: 1, maxLength: 253, description: "Name of the ConfigMap." },
            key: {
              type: "string",
              minLength: 1,
              maxLength: 253,
              default: "contract.json",
              description: 'Key in the ConfigMap (default "contract.json").',
            },
          },
        },
      },
    },
    scaling: {
      type: "object",
      default: {},
      description: "Autoscaling on the queue's backlog (ready + due-delayed + in-flight jobs).",
      "x-kubernetes-validations": [
        // has(): the API server validates the `default: {}` itself before filling its children.
        {
          rule: "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
          message: "scaling.minReplicas must be <= scaling.maxReplicas",
        },
        {
          rule: "!has(self.targetWaitSeconds) || !has(self.mode) || self.mode == 'direct'",
          message:
            "scaling.targetWaitSeconds needs scaling.mode: direct (the operator sizes a pool for a wait target itself; an HPA can only follow a per-replica average)",
        },
      ],
      properties: {
        mode: {
          type: "string",
          enum: ["hpa", "direct"],
          default: "hpa",
          description:
            "hpa: an HPA follows the operator's external metric (external.metrics.k8s.io). direct: no HPA; the operator runs the HPA algorithm itself and writes the Deployment's scale (for clusters whose external metrics API is taken).",
        },
        minReplicas: {
          type: "integer",
          minimum: 0,
          maximum: 10000,
          default: 0,
          description: "0 allows scale to zero.",
        },
        maxReplicas: { type: "integer", minimum: 1, maximum: 10000, default: 10 },
        targetBacklogPerReplica: {
          type: "integer",
          minimum: 1,
          maximum: 1000000,
          default: 10,
          description:
            "Desired replicas = ceil(backlog / targetBacklogPerReplica), tolerance 10%. With targetWaitSeconds: used only until job durations are measured.",
        },
        targetWaitSeconds: {
          type: "number",
          minimum: 0,
          exclusiveMinimum: true,
          maximum: 86400,
          description:
            "Latency mode (needs mode: direct): size the pool so a new job starts within this many seconds of its enqueue, from the arrival rate, the mean time a job holds a slot, the ready backlog and the oldest waiting job's age; scale-down follows behavior.scaleDown (stabilization window). See docs/operator.md#latency-mode.",
        },
        activationBacklog: {
          type: "integer",
          minimum: 0,
          default: 0,
          description: "Scale from zero only when the backlog exceeds this.",
        },
        cooldownSeconds: {
          type: "integer",
          minimum: 0,
          maximum: 86400,
          default: 120,
          description:
            "Scale to zero after this long with no backlog and nothing in flight (only when minReplicas is 0).",
        },
        pollSeconds: {
          type: "integer",
          minimum: 1,
          maximum: 3600,
          default: 5,
          description: "How often the backlog is read.",
        },
        behavior: {
          type: "object",
          description:
            "autoscaling/v2 HorizontalPodAutoscalerBehavior (scale-up/down rate limits and stabilization windows).",
          properties: { scaleUp: scalingRules("up"), scaleDown: scalingRules("down") },
        },
        paused: {
          type: "boolean",
          default: false,
          description:
            "Freeze the replica count: no HPA, no scaling decisions. The Deployment itself is still reconciled.",
        },
      },
    },
  },
} as const satisfies JSONSchemaProps;

/** Scale decisions kept in status.recentDecisions: bounded, so status (and the cache) stays small. */
export const RECENT_DECISIONS = 8;

const decisionProperties = {
  replicas: { type: "integer" },
  from: { type: "integer" },
  reason: { type: "string" },
  message: { type: "string" },
  at: { type: "string", format: "date-time" },
  backlog: { type: "integer", description: "The backlog the decision was made at." },
} as const;

export const statusSchema = {
  type: "object",
  properties: {
    observedGeneration: {
      type: "integer",
      format: "int64",
      description: "The generation the status describes.",
    },
    conditions: {
      type: "array",
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["type"],
      items: condition,
    },
    replicas: { type: "integer", description: "Pods of the worker Deployment (status.replicas)." },
    readyReplicas: { type: "integer" },
    desiredReplicas: {
      type: "integer",
      description: "The Deployment's spec.replicas: what the HPA or the operator asked for.",
    },
    readyOfDesired: { type: "string", description: "ready/desired, for kubectl get." },
    selector: { type: "string", description: "Label selector of the pool's pods (scale subresource)." },
    backlog: { type: "integer", description: "Ready + due-delayed + in-flight jobs at the last poll." },
    inflight: { type: "integer", description: "Jobs running at the last poll." },
    oldestReadySince: {
      type: "string",
      format: "date-time",
      description:
        "When the oldest waiting (ready) job was enqueued, at the last poll; absent when none waits. kubectl get wp -o wide shows its age (Oldest).",
    },
    lastScaleTime: {
      type: "string",
      format: "date-time",
      description: "When the operator last changed the replica count.",
    },
    control: {
      type: "object",
      description: "Queue control in force in Redis, and where it came from.",
      properties: {
        paused: { type: "boolean" },
        rateLimit: { type: "string", description: "e.g. 50/s; absent when none." },
        source: {
          type: "string",
          enum: ["spec", "redis"],
          description:
            "spec: spec.paused/spec.rateLimit set it; redis: set by the CLI or API, not managed by the spec.",
        },
        replicaCap: {
          type: "integer",
          description:
            "Replicas the rate limit or the resources can feed or the groups can use, the lowest (the pool is not scaled above this).",
        },
        capReason: { type: "string" },
        capBy: {
          type: "string",
          enum: ["rateLimit", "resources", "groups"],
          description:
            "What binds the cap: the queue's rate limit, the pool's resources, or groups at their limit or paused (the metric's `cap` label).",
        },
        summary: {
          type: "string",
          description:
            "paused, limited 50/s (cap 3), budget openai (cap 2), groups (cap 2), or empty: for kubectl get.",
        },
      },
    },
    contract: {
      type: "object",
      description: "The contract this pool published to its queue (spec.contract); absent when none.",
      properties: {
        hash: { type: "string", description: "Its content hash, as `conveyor contract get` shows it." },
        publishedAt: { type: "string", format: "date-time", description: "When the operator published it." },
        source: {
          type: "string",
          description: "inline (spec.contract) or configmap/<name>.",
        },
      },
    },
    lastDecision: {
      type: "object",
      description:
        "The last replica change and why: the operator's own, or the HPA's as the operator observed it (HPAScaleUp, HPAScaleDown).",
      properties: decisionProperties,
    },
    recentDecisions: {
      type: "array",
      maxItems: RECENT_DECISIONS,
      description: `The last ${RECENT_DECISIONS} replica changes (the operator's and the HPA's), oldest first (what the dashboard charts).`,
      items: { type: "object", properties: decisionProperties },
    },
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
