// The WorkerPool API: schema ↔ CRD ↔ types ↔ defaults ↔ the reference docs, and the committed files
// equal to what the generator writes.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { assertQueueName } from "../../../queue/index.ts";
import { schemaPaths } from "../jsonschema.ts";
import { CHART_CRD_FILE, CRD_FILE, workerPoolCRD, workerPoolCRDYaml } from "./crd.ts";
import { QUEUE_NAME_PATTERN, specSchema, statusSchema } from "./schema.ts";
import { withDefaults, type WorkerPoolSpec, type WorkerPool } from "./types.ts";
import { REFERENCE_FILE, withReference } from "./reference.ts";

const root = join(import.meta.dirname, "../../..");

describe("WorkerPool API", () => {
  it("the committed CRD and the field reference are generated from the schema (run `npm run gen:crds` when this fails)", () => {
    const committed = readFileSync(join(root, CRD_FILE), "utf8");
    assert.equal(committed, workerPoolCRDYaml(), `${CRD_FILE} is stale: run \`npm run gen:crds\``);
    assert.equal(
      readFileSync(join(root, CHART_CRD_FILE), "utf8"),
      workerPoolCRDYaml(),
      `${CHART_CRD_FILE} is stale: run \`npm run gen:crds\``,
    );
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
      ["Queue", "Backlog", "In-Flight", "Replicas", "Ready", "Control", "Rollout", "Age"],
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
      redis: {
        url: "redis://r:6379",
        secretRef: { name: "redis", key: "password" },
        tls: false,
        durability: "replicated",
      },
      database: { secretRef: { name: "pg", key: "url" } },
      handler: {
        module: "/app/h.js",
        http: { port: 1, path: "/" },
        command: ["x"],
        python: { callable: "app.handlers:extract" },
        passCredentials: false,
      },
      concurrency: 2,
      batch: { size: 50, minSize: 10, waitMs: 200 },
      notify: {
        url: "https://hooks.example.com/x",
        events: ["completed", "dead"],
        secretRef: { name: "webhook", key: "secret" },
        allow: ["10.0.0.0/8"],
      },
      maxJobSeconds: 60,
      drainSeconds: 30,
      paused: false,
      rateLimit: "50/s",
      resources: [
        {
          name: "openai",
          ceiling: 90,
          secretRef: { name: "openai-keys" },
          keys: [{ id: "k1", limits: ["requests=60/m", "tokens=200000/m"] }],
        },
      ],
      replicas: 1,
      upgrade: { autoFinalize: false },
      // (inline and configMapRef exclude each other: CEL, not the types; here for the paths)
      contract: {
        data: { type: "object" },
        result: { type: "object" },
        tasks: { t: { data: {}, result: {} } },
        configMapRef: { name: "c", key: "contract.json" },
      },
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
        targetWaitSeconds: 2.5,
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
      rollout: {
        canary: {
          steps: [{ weight: 10, holdSeconds: 300 }],
          analysis: { minJobs: 200, maxFailureRatio: 2, maxFailureRate: 0.05, maxP95Ratio: 2 },
        },
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
