// Operator unit tests: no cluster, no Redis. The API (schema ↔ CRD ↔ types ↔ defaults), the
// desired objects, the HPA algorithm, the work queue, spec validation.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { join } from "node:path";
import { parse } from "yaml";
import { assertQueueName } from "../queue/index.ts";
import { schemaPaths } from "../operator/apis/jsonschema.ts";
import { CRD_FILE, workerPoolCRD, workerPoolCRDYaml } from "../operator/apis/v1alpha1/crd.ts";
import { QUEUE_NAME_PATTERN, specSchema, statusSchema } from "../operator/apis/v1alpha1/schema.ts";
import { withDefaults, type WorkerPoolSpec } from "../operator/apis/v1alpha1/types.ts";
import { REFERENCE_FILE, withReference } from "../operator/apis/v1alpha1/reference.ts";

const root = join(import.meta.dirname, "..");

describe("WorkerPool API", () => {
  it("the committed CRD and the field reference are generated from the schema (run `npm run gen:crds` when this fails)", () => {
    const committed = readFileSync(join(root, CRD_FILE), "utf8");
    assert.equal(committed, workerPoolCRDYaml(), `${CRD_FILE} is stale: run \`npm run gen:crds\``);
    const doc = readFileSync(join(root, REFERENCE_FILE), "utf8");
    assert.equal(
      doc,
      withReference(doc),
      `the field reference in ${REFERENCE_FILE} is stale: run \`npm run gen:crds\``,
    );
    const crd = parse(committed) as ReturnType<typeof workerPoolCRD>;
    assert.equal(crd.metadata.name, "workerpools.conveyor.dev");
    assert.deepEqual(crd.spec.names.shortNames, ["wp"]);
    const v = crd.spec.versions[0]!;
    assert.deepEqual(v.subresources.status, {});
    assert.equal(v.subresources.scale.specReplicasPath, ".spec.replicas");
    assert.deepEqual(
      v.additionalPrinterColumns.filter((c) => !("priority" in c)).map((c) => c.name),
      ["Queue", "Backlog", "In-Flight", "Replicas", "Ready", "Age"],
    );
  });

  it("the schema's queue-name pattern is the queue protocol's grammar", () => {
    const re = new RegExp(QUEUE_NAME_PATTERN);
    const samples = [
      "ocr",
      "docs/ocr",
      "a",
      "A.b_c-d",
      "x/y",
      "",
      "/x",
      "x/",
      "a/b/c",
      "-x",
      "x y",
      "a".repeat(100),
      "a".repeat(101),
      `p/${"s".repeat(100)}`,
      "é",
    ];
    for (const s of samples) {
      let ok = true;
      try {
        assertQueueName(s);
      } catch {
        ok = false;
      }
      assert.equal(re.test(s), ok, `pattern and assertQueueName disagree on ${JSON.stringify(s)}`);
    }
  });

  it("defaults come from the schema and fill every defaulted field", () => {
    const spec: WorkerPoolSpec = withDefaults({
      queue: "docs/ocr",
      redis: { url: "redis://r:6379" },
      handler: { http: { port: 8080 } },
    });
    assert.equal(spec.concurrency, 1);
    assert.equal(spec.maxJobSeconds, 300);
    assert.equal(spec.redis.tls, false);
    assert.equal(spec.handler.http?.path, "/");
    assert.deepEqual(spec.template, {});
    assert.equal(spec.scaling.mode, "hpa");
    assert.equal(spec.scaling.minReplicas, 0);
    assert.equal(spec.scaling.maxReplicas, 10);
    assert.equal(spec.scaling.paused, false);
    assert.equal(
      spec.drainSeconds,
      undefined,
      "drainSeconds has no schema default: it follows maxJobSeconds",
    );
    // given values are kept
    const s2 = withDefaults({
      queue: "q",
      redis: { url: "redis://r", secretRef: { name: "s" } },
      handler: { module: "/m.js" },
      scaling: { maxReplicas: 3 },
    });
    assert.equal(s2.scaling.maxReplicas, 3);
    assert.equal(s2.redis.secretRef?.key, "password");
  });

  it("schema paths and the derived types agree (a spec using every field type-checks and survives defaulting)", () => {
    // Every leaf of the schema is set here; the compiler checks the names and types against
    // FromSchema<specSchema>, and this test checks the schema has no path the object misses.
    const full: WorkerPoolSpec = {
      queue: "p/a",
      nextQueue: "p/b",
      redis: { url: "redis://r:6379", secretRef: { name: "redis", key: "password" }, tls: false },
      database: { secretRef: { name: "pg", key: "url" } },
      handler: { module: "/app/h.js", http: { port: 1, path: "/" }, command: ["x"] },
      concurrency: 2,
      maxJobSeconds: 60,
      drainSeconds: 30,
      replicas: 1,
      template: {
        image: "i",
        imagePullPolicy: "IfNotPresent",
        imagePullSecrets: [{ name: "s" }],
        labels: { a: "b" },
        annotations: { a: "b" },
        env: [{ name: "A", value: "1" }],
        envFrom: [{ configMapRef: { name: "c" } }],
        resources: { requests: { cpu: "100m" } },
        volumeMounts: [{ name: "v", mountPath: "/v" }],
        volumes: [{ name: "v", emptyDir: {} }],
        containers: [{ name: "side", image: "s" }],
        nodeSelector: { a: "b" },
        tolerations: [{ key: "k", operator: "Exists" }],
        affinity: {},
        topologySpreadConstraints: [],
        serviceAccountName: "sa",
        priorityClassName: "p",
        securityContext: { runAsUser: 1000 },
      },
      scaling: {
        mode: "direct",
        minReplicas: 0,
        maxReplicas: 5,
        targetBacklogPerReplica: 10,
        activationBacklog: 0,
        cooldownSeconds: 30,
        pollSeconds: 2,
        behavior: {
          scaleUp: {
            stabilizationWindowSeconds: 0,
            selectPolicy: "Max",
            policies: [{ type: "Pods", value: 4, periodSeconds: 15 }],
          },
          scaleDown: {
            stabilizationWindowSeconds: 300,
            selectPolicy: "Max",
            policies: [{ type: "Percent", value: 100, periodSeconds: 15 }],
          },
        },
        paused: false,
      },
    };
    const objectPaths = new Set<string>();
    const walk = (v: unknown, prefix: string) => {
      if (Array.isArray(v)) {
        for (const item of v) walk(item, `${prefix}[]`);
      } else if (v && typeof v === "object") {
        for (const [k, child] of Object.entries(v)) {
          const p = prefix ? `${prefix}.${k}` : k;
          objectPaths.add(p);
          walk(child, p);
        }
      }
    };
    walk(full, "");
    const missing = schemaPaths(specSchema).filter((p) => !objectPaths.has(p));
    assert.deepEqual(missing, [], "schema fields the full example does not cover");
    assert.deepEqual(withDefaults(full), full);
    assert.ok(schemaPaths(statusSchema).includes("lastDecision.reason"));
  });
});

// ---------------------------------------------------------------------------------------------
// The HPA algorithm (direct mode) against the numbers kube-controller-manager produces.

import { HpaAlgorithm, replicasForMetric } from "../operator/scaling/hpa-algorithm.ts";

describe("HPA algorithm", () => {
  it("desired = ceil(total / target) outside a 10% tolerance, current inside it", () => {
    assert.equal(replicasForMetric(500, 10, 1), 50);
    assert.equal(replicasForMetric(105, 10, 10), 10, "ratio 1.05 is within tolerance");
    assert.equal(replicasForMetric(95, 10, 10), 10, "ratio 0.95 is within tolerance");
    assert.equal(replicasForMetric(115, 10, 10), 12, "ratio 1.15: ceil(11.5)");
    assert.equal(replicasForMetric(0, 10, 4), 0);
    assert.equal(replicasForMetric(1, 10, 1), 1);
  });

  it("scale-up is limited to max(+4 pods, +100%) per 15 s by default", () => {
    const hpa = new HpaAlgorithm();
    const base = { targetPerReplica: 10, minReplicas: 0, maxReplicas: 100 };
    const t0 = 1_000_000;
    let d = hpa.decide({ ...base, now: t0, total: 500, currentReplicas: 1 });
    assert.equal(d.replicas, 5);
    assert.equal(d.reason, "ScaleUpLimit");
    hpa.record(t0, 1, 5);
    d = hpa.decide({ ...base, now: t0 + 5_000, total: 500, currentReplicas: 5 });
    assert.equal(
      d.replicas,
      5,
      "within the same period the limit counts from the period's start (1 → 5 already)",
    );
    d = hpa.decide({ ...base, now: t0 + 15_001, total: 500, currentReplicas: 5 });
    assert.equal(d.replicas, 10, "next period: +100% beats +4");
    hpa.record(t0 + 15_001, 5, 10);
    d = hpa.decide({ ...base, now: t0 + 30_002, total: 500, currentReplicas: 10 });
    assert.equal(d.replicas, 20);
    d = hpa.decide({ ...base, now: t0 + 30_002, total: 5000, currentReplicas: 100 });
    assert.equal(d.replicas, 100, "never above maxReplicas");
  });

  it("scale-down waits for the 300 s stabilization window (highest recent recommendation)", () => {
    const hpa = new HpaAlgorithm();
    const base = { targetPerReplica: 10, minReplicas: 0, maxReplicas: 100 };
    const t0 = 5_000_000;
    assert.equal(hpa.decide({ ...base, now: t0, total: 100, currentReplicas: 10 }).replicas, 10);
    const d = hpa.decide({ ...base, now: t0 + 60_000, total: 20, currentReplicas: 10 });
    assert.equal(d.replicas, 10);
    assert.equal(d.reason, "ScaleDownStabilized");
    assert.equal(hpa.decide({ ...base, now: t0 + 299_000, total: 20, currentReplicas: 10 }).replicas, 10);
    assert.equal(
      hpa.decide({ ...base, now: t0 + 301_000, total: 20, currentReplicas: 10 }).replicas,
      2,
      "the 10 left the window",
    );
  });

  it("honours behavior: no window, Pods policies, Min select, Disabled", () => {
    const base = { targetPerReplica: 10, minReplicas: 1, maxReplicas: 100 };
    const now = 9_000_000;
    const fast = new HpaAlgorithm();
    assert.equal(
      fast.decide({
        ...base,
        now,
        total: 20,
        currentReplicas: 10,
        behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
      }).replicas,
      2,
    );
    const slow = new HpaAlgorithm();
    const d = slow.decide({
      ...base,
      now,
      total: 20,
      currentReplicas: 10,
      behavior: {
        scaleDown: {
          stabilizationWindowSeconds: 0,
          policies: [{ type: "Pods", value: 1, periodSeconds: 60 }],
        },
      },
    });
    assert.equal(d.replicas, 9);
    assert.equal(d.reason, "ScaleDownLimit");
    const minSelect = new HpaAlgorithm();
    assert.equal(
      minSelect.decide({
        ...base,
        now,
        total: 1000,
        currentReplicas: 10,
        behavior: {
          scaleUp: {
            selectPolicy: "Min",
            policies: [
              { type: "Pods", value: 2, periodSeconds: 15 },
              { type: "Percent", value: 50, periodSeconds: 15 },
            ],
          },
        },
      }).replicas,
      12,
    );
    const disabled = new HpaAlgorithm();
    assert.equal(
      disabled.decide({
        ...base,
        now,
        total: 1000,
        currentReplicas: 3,
        behavior: { scaleUp: { selectPolicy: "Disabled" } },
      }).replicas,
      3,
    );
    const floor = new HpaAlgorithm();
    assert.equal(
      floor.decide({
        ...base,
        minReplicas: 0,
        now,
        total: 0,
        currentReplicas: 3,
        behavior: { scaleDown: { stabilizationWindowSeconds: 0 } },
      }).replicas,
      1,
      "the HPA's floor is 1",
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Desired vs observed

import { configHash, isSubset, parseQuantity } from "../operator/controllers/diff.ts";

describe("desired vs observed", () => {
  it("parses quantities", () => {
    assert.equal(parseQuantity("500m"), 0.5);
    assert.equal(parseQuantity("1Gi"), 2 ** 30);
    assert.equal(parseQuantity("1e3"), 1000);
    assert.equal(parseQuantity("2"), 2);
    assert.equal(parseQuantity("abc"), undefined);
    assert.equal(parseQuantity("1.0.0"), undefined);
  });

  it("a live object with defaults, other managers' fields and canonical quantities contains what was applied", () => {
    const want = {
      metadata: { labels: { a: "1" } },
      spec: {
        paused: false,
        template: {
          spec: {
            containers: [
              {
                name: "worker",
                args: ["worker"],
                env: [{ name: "A", value: "" }],
                resources: { requests: { cpu: "0.5", memory: "1024Mi" } },
              },
            ],
            volumes: [{ name: "tmp", emptyDir: {} }],
          },
        },
      },
    };
    const live = {
      metadata: { labels: { a: "1", extra: "x" }, resourceVersion: "5" },
      spec: {
        replicas: 3,
        template: {
          spec: {
            containers: [
              { name: "istio-proxy", image: "proxy" },
              {
                name: "worker",
                args: ["worker"],
                env: [{ name: "A" }],
                resources: { requests: { cpu: "500m", memory: "1Gi" } },
                terminationMessagePath: "/dev/termination-log",
              },
            ],
            volumes: [{ name: "tmp", emptyDir: {} }],
            dnsPolicy: "ClusterFirst",
          },
        },
      },
    };
    assert.ok(isSubset(want, live));
    assert.ok(
      !isSubset(
        { spec: { template: { spec: { containers: [{ name: "worker", args: ["worker", "x"] }] } } } },
        live,
      ),
      "scalar lists must be equal",
    );
    assert.ok(
      !isSubset({ spec: { template: { spec: { containers: [{ name: "worker", image: "new" }] } } } }, live),
      "a changed field is drift",
    );
    assert.ok(!isSubset({ metadata: { labels: { b: "2" } } }, live), "a missing label is drift");
  });

  it("hashes ignore key order", () => {
    assert.equal(configHash({ a: 1, b: { c: 2, d: [1, 2] } }), configHash({ b: { d: [1, 2], c: 2 }, a: 1 }));
    assert.notEqual(configHash({ a: [1, 2] }), configHash({ a: [2, 1] }));
  });
});

// ---------------------------------------------------------------------------------------------
// The worker Deployment and the HPA

import {
  desiredDeployment,
  handlerEnv,
  effectiveRedisUrl,
  terminationGraceSeconds,
} from "../operator/controllers/deployment.ts";
import { desiredHPA, wantsHPA } from "../operator/controllers/hpa.ts";
import type { WorkerPool } from "../operator/apis/v1alpha1/types.ts";
import type { V1Container } from "@kubernetes/client-node";

function pool(spec: Parameters<typeof withDefaults>[0], name = "ocr"): WorkerPool {
  return {
    apiVersion: "conveyor.dev/v1alpha1",
    kind: "WorkerPool",
    metadata: { name, namespace: "jobs", uid: "uid-1", generation: 1 },
    spec: withDefaults(spec),
  };
}

describe("worker Deployment", () => {
  const base = {
    queue: "docs/ocr",
    nextQueue: "docs/embed",
    redis: { url: "redis://redis:6379", secretRef: { name: "redis" } },
    handler: { module: "/app/ocr.js" },
  };

  it("follows the worker contract: args, env, secrets by reference, POD_NAME, port", () => {
    const p = pool({ ...base, concurrency: 4, maxJobSeconds: 120, database: { secretRef: { name: "pg" } } });
    const d = desiredDeployment(p, p.spec, { defaultImage: "ghcr.io/conveyor-dev/conveyor-worker:0.1.0" });
    const c = d.spec!.template!.spec!.containers[0] as V1Container;
    assert.equal(c.name, "worker");
    assert.equal(c.image, "ghcr.io/conveyor-dev/conveyor-worker:0.1.0");
    assert.deepEqual(c.args, ["worker"]);
    const env = Object.fromEntries(c.env!.map((e) => [e.name, e.value ?? e.valueFrom]));
    assert.equal(env.CONVEYOR_QUEUE, "docs/ocr");
    assert.equal(env.CONVEYOR_NEXT_QUEUE, "docs/embed");
    assert.equal(env.CONVEYOR_HANDLER, "module:/app/ocr.js");
    assert.equal(env.CONVEYOR_CONCURRENCY, "4");
    assert.equal(env.CONVEYOR_JOB_TIMEOUT_SECONDS, "120");
    assert.equal(env.CONVEYOR_DRAIN_SECONDS, "120", "drain defaults to maxJobSeconds");
    assert.equal(env.CONVEYOR_PORT, "9464");
    assert.equal(env.REDIS_URL, "redis://redis:6379");
    assert.deepEqual(env.REDIS_PASSWORD, { secretKeyRef: { name: "redis", key: "password" } });
    assert.deepEqual(env.DATABASE_URL, { secretKeyRef: { name: "pg", key: "url" } });
    assert.deepEqual(env.POD_NAME, { fieldRef: { fieldPath: "metadata.name" } });
    assert.equal(d.spec!.template!.spec!.terminationGracePeriodSeconds, 130);
    assert.equal(d.spec!.replicas, undefined, "replicas are not part of the desired configuration");
    assert.deepEqual(d.metadata.ownerReferences, [
      {
        apiVersion: "conveyor.dev/v1alpha1",
        kind: "WorkerPool",
        name: "ocr",
        uid: "uid-1",
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
  });

  it("is locked down and observable", () => {
    const p = pool(base);
    const d = desiredDeployment(p, p.spec, { defaultImage: "img" });
    const ps = d.spec!.template!.spec!;
    const c = ps.containers[0]!;
    assert.deepEqual(c.securityContext, {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
    assert.equal(ps.securityContext?.runAsNonRoot, true);
    assert.equal(ps.securityContext?.seccompProfile?.type, "RuntimeDefault");
    assert.equal(ps.automountServiceAccountToken, false);
    assert.deepEqual(c.volumeMounts?.[0], { name: "tmp", mountPath: "/tmp" });
    assert.deepEqual(ps.volumes?.[0], { name: "tmp", emptyDir: {} });
    assert.equal(c.readinessProbe?.httpGet?.path, "/readyz");
    assert.equal(c.livenessProbe?.httpGet?.path, "/healthz");
    assert.equal(d.spec!.template!.metadata!.annotations!["prometheus.io/scrape"], "true");
    assert.equal(d.spec!.template!.metadata!.annotations!["prometheus.io/port"], "9464");
    assert.equal(d.spec!.selector!.matchLabels!["conveyor.dev/workerpool"], "ocr");
  });

  it("merges the template: image, env, resources, sidecars, scheduling, service account", () => {
    const p = pool({
      ...base,
      handler: { http: { port: 8080, path: "/run" } },
      drainSeconds: 20,
      template: {
        image: "my/worker:2",
        env: [
          { name: "A", value: "1" },
          { name: "CONVEYOR_QUEUE", value: "evil" },
        ],
        resources: { limits: { memory: "512Mi" } },
        containers: [{ name: "handler", image: "my/handler:1" }],
        nodeSelector: { pool: "workers" },
        tolerations: [{ key: "dedicated", operator: "Exists" }],
        serviceAccountName: "ocr",
        labels: { team: "docs" },
      },
    });
    const d = desiredDeployment(p, p.spec, { defaultImage: "img" });
    const ps = d.spec!.template!.spec!;
    assert.equal(ps.containers[0]!.image, "my/worker:2");
    assert.equal(ps.containers[1]!.name, "handler");
    assert.equal(
      ps.containers[0]!.env!.filter((e) => e.name === "CONVEYOR_QUEUE").length,
      1,
      "reserved env cannot be overridden",
    );
    assert.equal(ps.containers[0]!.env!.find((e) => e.name === "A")?.value, "1");
    assert.equal(
      ps.containers[0]!.env!.find((e) => e.name === "CONVEYOR_HANDLER")?.value,
      "http://127.0.0.1:8080/run",
    );
    assert.deepEqual(ps.containers[0]!.resources, { limits: { memory: "512Mi" } });
    assert.deepEqual(ps.nodeSelector, { pool: "workers" });
    assert.equal(ps.serviceAccountName, "ocr");
    assert.equal(ps.automountServiceAccountToken, undefined);
    assert.equal(ps.terminationGracePeriodSeconds, 30);
    assert.equal(d.spec!.template!.metadata!.labels!.team, "docs");
    assert.equal(d.spec!.template!.metadata!.labels!["conveyor.dev/workerpool"], "ocr");
  });

  it("handler and Redis URL forms", () => {
    assert.equal(handlerEnv({ command: ["/bin/convert", "-"] }), 'command:["/bin/convert","-"]');
    assert.equal(handlerEnv({ module: "/m.js" }), "module:/m.js");
    const tls = withDefaults({ ...base, redis: { url: "redis://r:6380", tls: true } });
    assert.equal(effectiveRedisUrl(tls), "rediss://r:6380");
    const cl = withDefaults({ ...base, redis: { url: "redis-cluster://a:1,b:2", tls: true } });
    assert.equal(effectiveRedisUrl(cl), "redis-cluster://a:1,b:2?tls=true");
    assert.equal(terminationGraceSeconds(withDefaults({ ...base, maxJobSeconds: 60, drainSeconds: 0 })), 10);
  });

  it("the HPA scales the Deployment on the external backlog metric, 1..max", () => {
    const p = pool({
      ...base,
      scaling: {
        minReplicas: 0,
        maxReplicas: 7,
        targetBacklogPerReplica: 25,
        behavior: { scaleDown: { stabilizationWindowSeconds: 30 } },
      },
    });
    const h = desiredHPA(p, p.spec);
    assert.deepEqual(h.spec!.scaleTargetRef, { apiVersion: "apps/v1", kind: "Deployment", name: "ocr" });
    assert.equal(h.spec!.minReplicas, 1);
    assert.equal(h.spec!.maxReplicas, 7);
    assert.deepEqual(h.spec!.metrics, [
      {
        type: "External",
        external: {
          metric: { name: "conveyor-backlog", selector: { matchLabels: { workerpool: "ocr" } } },
          target: { type: "AverageValue", averageValue: "25" },
        },
      },
    ]);
    assert.deepEqual(h.spec!.behavior, { scaleDown: { stabilizationWindowSeconds: 30 } });
    assert.ok(wantsHPA(p.spec));
    assert.ok(!wantsHPA(withDefaults({ ...base, scaling: { mode: "direct" } })));
    assert.ok(!wantsHPA(withDefaults({ ...base, scaling: { paused: true } })));
    assert.ok(!wantsHPA(withDefaults({ ...base, replicas: 2 })));
  });
});

// ---------------------------------------------------------------------------------------------
// Scaling decisions the operator makes itself

import {
  decideScale,
  deletionCosts,
  newPoolScaler,
  BUSY_COST,
  IDLE_COST,
} from "../operator/controllers/scaling.ts";
import type { QueueCounts } from "../queue/index.ts";

const counts = (backlog: number, inflight = 0): QueueCounts => ({
  ready: backlog - inflight,
  delayed: 0,
  dueDelayed: 0,
  inflight,
  dead: 0,
  completed: 0,
  backlog,
});

describe("scaling decisions", () => {
  const base = { queue: "q", redis: { url: "redis://r" }, handler: { module: "/m.js" } };

  it("activates from zero above the activation threshold only", () => {
    const spec = withDefaults({ ...base, scaling: { activationBacklog: 5 } });
    const s = newPoolScaler(0);
    assert.equal(
      decideScale(s, { now: 1000, spec, current: 0, statusReplicas: 0, counts: counts(5) }),
      undefined,
    );
    const d = decideScale(s, { now: 2000, spec, current: 0, statusReplicas: 0, counts: counts(6) });
    assert.equal(d?.replicas, 1);
    assert.equal(d?.reason, "Activated");
  });

  it("scales to zero only after the cooldown with no backlog and nothing in flight", () => {
    const spec = withDefaults({ ...base, scaling: { cooldownSeconds: 30 } });
    const s = newPoolScaler(0);
    assert.equal(
      decideScale(s, { now: 10_000, spec, current: 3, statusReplicas: 3, counts: counts(1, 1) }),
      undefined,
      "a running job keeps the pool",
    );
    assert.equal(
      decideScale(s, { now: 20_000, spec, current: 3, statusReplicas: 3, counts: counts(0) }),
      undefined,
    );
    assert.equal(
      decideScale(s, { now: 39_999, spec, current: 3, statusReplicas: 3, counts: counts(0) }),
      undefined,
    );
    const d = decideScale(s, { now: 40_000, spec, current: 3, statusReplicas: 3, counts: counts(0) });
    assert.equal(d?.replicas, 0);
    assert.equal(d?.reason, "CooledDown");
    const withMin = withDefaults({ ...base, scaling: { cooldownSeconds: 0, minReplicas: 1 } });
    assert.equal(
      decideScale(newPoolScaler(0), {
        now: 99_999,
        spec: withMin,
        current: 2,
        statusReplicas: 2,
        counts: counts(0),
      }),
      undefined,
      "minReplicas > 0 never goes to zero",
    );
  });

  it("never decides without a backlog reading, when paused, and pins spec.replicas", () => {
    const s = newPoolScaler(0);
    assert.equal(
      decideScale(s, {
        now: 1e9,
        spec: withDefaults({ ...base, scaling: { cooldownSeconds: 0 } }),
        current: 2,
        statusReplicas: 2,
        counts: undefined,
      }),
      undefined,
    );
    assert.equal(
      decideScale(s, {
        now: 1e9,
        spec: withDefaults({ ...base, scaling: { paused: true } }),
        current: 0,
        statusReplicas: 0,
        counts: counts(100),
      }),
      undefined,
    );
    const pinned = decideScale(s, {
      now: 1e9,
      spec: withDefaults({ ...base, replicas: 4 }),
      current: 1,
      statusReplicas: 1,
      counts: undefined,
    });
    assert.equal(pinned?.replicas, 4);
    assert.equal(pinned?.reason, "ManualReplicas");
    const below = decideScale(newPoolScaler(0), {
      now: 1,
      spec: withDefaults({ ...base, scaling: { minReplicas: 2 } }),
      current: 0,
      statusReplicas: 0,
      counts: counts(0),
    });
    assert.equal(below?.replicas, 2);
  });

  it("direct mode runs the HPA algorithm between 1 and max", () => {
    const spec = withDefaults({
      ...base,
      scaling: { mode: "direct", maxReplicas: 8, targetBacklogPerReplica: 10 },
    });
    const s = newPoolScaler(0);
    const d = decideScale(s, { now: 1000, spec, current: 1, statusReplicas: 1, counts: counts(500) });
    assert.equal(d?.replicas, 5);
    assert.equal(d?.reason, "DirectScaleUp");
    const hpaMode = withDefaults({ ...base, scaling: { maxReplicas: 8 } });
    assert.equal(
      decideScale(newPoolScaler(0), {
        now: 1000,
        spec: hpaMode,
        current: 1,
        statusReplicas: 1,
        counts: counts(500),
      }),
      undefined,
      "in hpa mode the HPA does 1..N",
    );
  });

  it("pod-deletion-cost: idle pods cheapest, busy pods expensive, unknown untouched", () => {
    const now = 1_000_000;
    const costs = deletionCosts(
      ["a", "b", "c", "d"],
      [
        { id: "a", pod: "a", slots: 4, busy: 0, draining: false, seen: now - 1000 },
        { id: "b", pod: "b", slots: 4, busy: 2, draining: false, seen: now - 1000 },
        { id: "c", pod: "c", slots: 4, busy: 0, draining: false, seen: now - 120_000 },
      ],
      now,
    );
    assert.equal(costs.get("a"), IDLE_COST);
    assert.equal(costs.get("b"), BUSY_COST);
    assert.equal(costs.get("c"), undefined, "a stale report says nothing");
    assert.equal(costs.get("d"), undefined);
    assert.ok(
      Number(IDLE_COST) < 0 && Number(BUSY_COST) > 0,
      "idle below an unannotated pod (0), busy above",
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Work queue

import { WorkQueue } from "../operator/kube/workqueue.ts";

describe("work queue", () => {
  it("de-duplicates and never hands out a key twice at once", async () => {
    const q = new WorkQueue();
    q.add("a");
    q.add("a");
    q.add("b");
    assert.equal(q.length, 2);
    const k1 = await q.get();
    assert.equal(k1, "a");
    q.add("a"); // while processing: marked dirty, not queued
    assert.equal(q.length, 1);
    assert.equal(await q.get(), "b");
    q.done("b");
    q.done("a"); // dirty: re-queued now
    assert.equal(q.length, 1);
    assert.equal(await q.get(), "a");
    q.done("a");
    q.shutDown();
    assert.equal(await q.get(), undefined);
  });

  it("backs off per key after failures and forgets on success", async () => {
    const q = new WorkQueue({ baseDelayMs: 10, maxDelayMs: 1000 });
    assert.equal(q.addRateLimited("k"), 10);
    assert.equal(q.addRateLimited("k"), 20);
    assert.equal(q.addRateLimited("k"), 40);
    q.forget("k");
    assert.equal(q.addRateLimited("k"), 10);
    assert.equal(await q.get(), "k", "the delayed add arrives");
    q.done("k");
    q.shutDown();
  });
});

// ---------------------------------------------------------------------------------------------
// Status

import { computeStatus } from "../operator/controllers/status.ts";
import { validateSpec } from "../operator/controllers/validate.ts";

describe("status and validation", () => {
  const base = { queue: "q", redis: { url: "redis://r" }, handler: { module: "/m.js" } };

  it("is a fixed point when nothing changes (an idle pool writes no status)", () => {
    const p = pool(base);
    const input = {
      pool: p,
      spec: p.spec,
      deployment: {
        metadata: { name: "ocr" },
        spec: { replicas: 2 },
        status: { replicas: 2, readyReplicas: 2 },
      },
      hpa: undefined,
      sample: { at: 1, failures: 0, counts: counts(7), lastGood: { at: 1, counts: counts(7) } },
      sampleUsable: true,
      problems: [],
      lastDecision: undefined,
    };
    const s1 = computeStatus({ ...input, now: new Date(1_000_000) });
    const s2 = computeStatus({ ...input, pool: { ...p, status: s1 }, now: new Date(2_000_000) });
    assert.deepEqual(s2, s1, "same inputs later: same status (no timestamps move)");
    assert.equal(s1.readyOfDesired, "2/2");
    assert.equal(s1.backlog, 7);
    const degraded = computeStatus({
      ...input,
      pool: { ...p, status: s1 },
      problems: [{ reason: "RedisUnreachable", message: "down" }],
      now: new Date(3_000_000),
    });
    const ready = degraded.conditions!.find((c) => c.type === "Ready")!;
    assert.equal(ready.status, "False");
    assert.equal(ready.reason, "RedisUnreachable");
    assert.equal(ready.lastTransitionTime, "1970-01-01T00:50:00Z");
    assert.equal(degraded.conditions!.find((c) => c.type === "Degraded")!.status, "True");
  });

  it("validates what the schema may not have caught", () => {
    assert.deepEqual(validateSpec(withDefaults(base)), []);
    const bad = withDefaults({
      ...base,
      queue: "a/b",
      nextQueue: "c/d",
      handler: { module: "/m.js", command: ["x"] },
      scaling: { minReplicas: 5, maxReplicas: 2 },
    });
    const problems = validateSpec(bad);
    assert.equal(problems.length, 3, problems.join("\n"));
    assert.match(problems.join("\n"), /same pipeline|share|prefix/i);
    assert.match(problems.join("\n"), /exactly one/);
    assert.match(problems.join("\n"), /minReplicas/);
    assert.match(
      validateSpec(withDefaults({ ...base, redis: { url: "redis://:s3cr3tpw@r" } })).join(),
      /password/,
    );
    assert.doesNotMatch(
      validateSpec(withDefaults({ ...base, redis: { url: "redis://:s3cr3tpw@r" } })).join(),
      /s3cr3tpw/,
      "never echo the password",
    );
  });
});

// ---------------------------------------------------------------------------------------------
// External metrics API, configuration

import { MetricsApiServer, parseSelector } from "../operator/metricsapi/server.ts";
import { selfSignedCert } from "../operator/metricsapi/selfsigned.ts";
import { ServingCertificate } from "../operator/metricsapi/servingCertificate.ts";
import { loadOperatorConfig } from "../operator/config.ts";
import { urlWithPassword } from "../operator/scaling/backlog.ts";
import * as https from "node:https";

function getJson(port: number, path: string, ca: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    https
      .get({ host: "127.0.0.1", port, path, ca, servername: "localhost", agent: false }, (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text || "{}") }));
      })
      .on("error", reject);
  });
}

describe("external metrics API", () => {
  it("parses label selectors", () => {
    assert.deepEqual(parseSelector("workerpool=ocr"), { workerpool: "ocr" });
    assert.deepEqual(parseSelector("workerpool==ocr,a=b"), { workerpool: "ocr", a: "b" });
    assert.deepEqual(parseSelector("workerpool in (ocr)"), { workerpool: "ocr" });
    assert.equal(parseSelector("workerpool notin (x)"), undefined);
  });

  it("serves discovery and each pool's backlog over TLS; 503 when unavailable", async () => {
    const { cert, key } = selfSignedCert("test", ["localhost", "127.0.0.1"]);
    const server = new MetricsApiServer({
      host: "127.0.0.1",
      port: 0,
      cert,
      key,
      lookup: (ns, name) =>
        name === "ocr"
          ? { kind: "ok", value: 500, at: Date.now() }
          : name === "down"
            ? { kind: "unavailable", message: "redis down" }
            : { kind: "not-found", message: `no ${ns}/${name}` },
    });
    const { port } = await server.start();
    try {
      const disc = await getJson(port, "/apis/external.metrics.k8s.io/v1beta1", cert);
      assert.equal(disc.status, 200);
      assert.equal(disc.body.resources[0].name, "conveyor-backlog");
      const ok = await getJson(
        port,
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/jobs/conveyor-backlog?labelSelector=workerpool%3Docr",
        cert,
      );
      assert.equal(ok.status, 200);
      assert.equal(ok.body.kind, "ExternalMetricValueList");
      assert.equal(ok.body.items[0].value, "500");
      assert.deepEqual(ok.body.items[0].metricLabels, { workerpool: "ocr" });
      assert.equal(
        (
          await getJson(
            port,
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/jobs/conveyor-backlog?labelSelector=workerpool%3Ddown",
            cert,
          )
        ).status,
        503,
      );
      assert.equal(
        (
          await getJson(
            port,
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/jobs/conveyor-backlog?labelSelector=workerpool%3Dnone",
            cert,
          )
        ).status,
        404,
      );
      assert.equal(
        (await getJson(port, "/apis/external.metrics.k8s.io/v1beta1/namespaces/jobs/conveyor-backlog", cert))
          .status,
        400,
      );
      assert.equal(
        (
          await getJson(
            port,
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/jobs/other-metric?labelSelector=workerpool%3Docr",
            cert,
          )
        ).status,
        404,
      );
    } finally {
      await server.stop();
    }
  });

  it("serves a rotated certificate from its files to new connections; a half-rotated pair keeps the old one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "conveyor-cert-"));
    const certFile = join(dir, "tls.crt");
    const keyFile = join(dir, "tls.key");
    const first = selfSignedCert("first", ["localhost", "127.0.0.1"]);
    const second = selfSignedCert("second", ["localhost", "127.0.0.1"]);
    writeFileSync(certFile, first.cert);
    writeFileSync(keyFile, first.key);
    const serving = new ServingCertificate(certFile, keyFile);
    const server = new MetricsApiServer({
      host: "127.0.0.1",
      port: 0,
      ...serving.pair,
      lookup: () => ({ kind: "not-found", message: "none" }),
    });
    const { port } = await server.start();
    const discovery = "/apis/external.metrics.k8s.io/v1beta1";
    try {
      assert.equal((await getJson(port, discovery, first.cert)).status, 200);
      writeFileSync(certFile, second.cert); // the key file not yet: a mismatched pair
      assert.equal(
        serving.check((p) => server.setCertificate(p)),
        false,
        "a mismatched pair is not loaded",
      );
      assert.equal((await getJson(port, discovery, first.cert)).status, 200);
      writeFileSync(keyFile, second.key);
      assert.equal(
        serving.check((p) => server.setCertificate(p)),
        true,
      );
      assert.equal(
        (await getJson(port, discovery, second.cert)).status,
        200,
        "the new certificate is served",
      );
      await assert.rejects(getJson(port, discovery, first.cert), "the old certificate is no longer served");
      assert.equal(
        serving.check((p) => server.setCertificate(p)),
        false,
        "unchanged files: nothing to do",
      );
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("configuration errors name the flag and its variable", () => {
    assert.throws(
      () => loadOperatorConfig(["--metrics-port", "x"], {}),
      /--metrics-port \/ CONVEYOR_METRICS_PORT/,
    );
    assert.throws(
      () => loadOperatorConfig([], { CONVEYOR_LEADER_ELECT: "maybe" }),
      /--leader-elect \/ CONVEYOR_LEADER_ELECT/,
    );
    assert.throws(() => loadOperatorConfig(["--namespaces", "Bad_NS"], {}), /--namespaces/);
    assert.throws(
      () => loadOperatorConfig(["--renew-deadline", "20"], {}),
      /--renew-deadline.*less than.*--lease-duration/,
    );
    assert.throws(() => loadOperatorConfig(["--metrics-api-cert", "/nonexistent"], {}), /--metrics-api-cert/);
    const c = loadOperatorConfig(["--namespaces", "a,b"], { CONVEYOR_METRICS_API: "false" });
    assert.deepEqual(c.namespaces, ["a", "b"]);
    assert.equal(c.metricsApi, false);
    assert.equal(c.leaseDurationMs, 15_000);
    assert.equal(c.renewDeadlineMs, 10_000);
    assert.equal(c.retryPeriodMs, 2_000);
    assert.match(c.workerImage, /^ghcr\.io\/conveyor-dev\/conveyor-worker:\d/);
  });

  it("passes a Secret's Redis password in the URL connectRedis takes, encoded", () => {
    assert.equal(urlWithPassword("redis://r:6379/2", "p@ss:w/rd"), "redis://:p%40ss%3Aw%2Frd@r:6379/2");
    assert.equal(urlWithPassword("redis-cluster://a:1,b:2", "x"), "redis-cluster://:x@a:1,b:2");
    assert.equal(urlWithPassword("redis://user@r", "x"), "redis://user:x@r");
    assert.equal(urlWithPassword("redis://r", undefined), "redis://r");
  });
});

// ---------------------------------------------------------------------------------------------
// The informer survives what stops client-node's: a failed watch, a 410 Gone, a closed stream.

import * as http from "node:http";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeClient } from "../operator/kube/client.ts";
import { Informer } from "../operator/kube/informer.ts";
import { createOperatorMetrics } from "../operator/metrics.ts";

describe("informer", () => {
  it(
    "relists after a watch error, a reset connection and 410 Gone, re-watches after a closed stream, and reports every change",
    { timeout: 30_000 },
    async () => {
      const obj = (name: string, rv: string) => ({
        metadata: { name, namespace: "ns", resourceVersion: rv },
      });
      const lists = [
        { metadata: { resourceVersion: "2" }, items: [obj("a", "1")] },
        { metadata: { resourceVersion: "2" }, items: [obj("a", "1")] },
        { metadata: { resourceVersion: "6" }, items: [obj("a", "5")] },
        { metadata: { resourceVersion: "8" }, items: [obj("a", "7")] },
      ];
      let listCalls = 0;
      let watchCalls = 0;
      const watchRVs: string[] = [];
      const open: http.ServerResponse[] = [];
      const server = http.createServer((req, res) => {
        const url = new URL(req.url!, "http://x");
        if (url.searchParams.get("watch") !== "true") {
          const l = lists[Math.min(listCalls++, lists.length - 1)];
          res.writeHead(200, { "Content-Type": "application/json" });
          return res.end(JSON.stringify(l));
        }
        watchCalls++;
        watchRVs.push(url.searchParams.get("resourceVersion") ?? "");
        if (watchCalls === 1) {
          res.writeHead(500);
          return res.end('{"kind":"Status","message":"etcd hiccup","code":500}');
        }
        res.writeHead(200, { "Content-Type": "application/json" });
        if (watchCalls === 2) {
          res.write(`${JSON.stringify({ type: "ADDED", object: obj("b", "3") })}\n`);
          res.write(`${JSON.stringify({ type: "MODIFIED", object: obj("a", "4") })}\n`);
          return res.end(); // the server closes the watch (timeoutSeconds): re-watch from rv 4
        }
        if (watchCalls === 3) {
          return res.end(
            `${JSON.stringify({ type: "ERROR", object: { kind: "Status", code: 410, message: "too old resource version" } })}\n`,
          );
        }
        if (watchCalls === 4) {
          // an event, then the connection is reset (an API server restarting)
          res.write(`${JSON.stringify({ type: "MODIFIED", object: obj("a", "7") })}\n`, () =>
            setTimeout(() => res.socket?.destroy(), 20),
          );
          return;
        }
        open.push(res); // stays open
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const port = (server.address() as { port: number }).port;
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: "c", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
        users: [{ name: "u" }],
        contexts: [{ name: "x", cluster: "c", user: "u" }],
        currentContext: "x",
      });
      const metrics = createOperatorMetrics(undefined, { defaultMetrics: false });
      const inf = new Informer<ReturnType<typeof obj>>(new KubeClient(kc, { metrics }), {
        path: "/apis/x/v1/things",
        minBackoffMs: 10,
        maxBackoffMs: 50,
        metrics,
      });
      const seen: string[] = [];
      let syncs = 0;
      inf.on({
        add: (o) => seen.push(`add ${o.metadata.name}@${o.metadata.resourceVersion}`),
        update: (o) => seen.push(`update ${o.metadata.name}@${o.metadata.resourceVersion}`),
        delete: (o) => seen.push(`delete ${o.metadata.name}`),
        synced: () => syncs++,
      });
      inf.start();
      try {
        for (let i = 0; i < 200 && open.length === 0; i++) await sleep(25);
        assert.equal(open.length, 1, "watching again at the end");
        assert.deepEqual(seen, ["add a@1", "add b@3", "update a@4", "update a@5", "delete b", "update a@7"]);
        assert.deepEqual(
          watchRVs,
          ["2", "2", "4", "6", "8"],
          "watch from the list's version, from the last event's, and after each relist",
        );
        assert.equal(listCalls, 4, "initial list, relists after the 500, the 410 and the reset");
        assert.equal(syncs, 4);
        assert.deepEqual(
          inf.list().map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`),
          ["a@7"],
        );
        const restarts = (await metrics.informerRestarts.get()).values.reduce((n, v) => n + v.value, 0);
        assert.equal(restarts, 2, "the 500 and the reset count as restarts; the 410 is a normal relist");
      } finally {
        for (const res of open) res.destroy();
        await inf.stop();
        server.closeAllConnections();
        server.close();
      }
    },
  );
});
