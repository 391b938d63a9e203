// The desired worker Deployment and HPA of a WorkerPool (pure functions of the spec).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { withDefaults, type WorkerPool } from "../apis/v1alpha1/types.ts";
import {
  desiredDeployment,
  RESOURCES_DIR,
  RESOURCES_VOLUME,
  NOTIFY_DIR,
  NOTIFY_VOLUME,
  handlerEnv,
  effectiveRedisUrl,
  pythonVariant,
  terminationGraceSeconds,
  workerEnv,
} from "./deployment.ts";
import { desiredHPA, wantsHPA } from "./hpa.ts";
import type { V1Container } from "@kubernetes/client-node";
import { pool } from "./fixtures.ts";

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
    assert.equal(env.CONVEYOR_JOB_TIMEOUT, "120");
    assert.equal(env.CONVEYOR_DRAIN, "120");
    assert.equal(env.CONVEYOR_PORT, "9464");
    assert.equal(env.REDIS_URL, "redis://redis:6379");
    assert.deepEqual(env.REDIS_PASSWORD, { secretKeyRef: { name: "redis", key: "password" } });
    assert.deepEqual(env.DATABASE_URL, { secretKeyRef: { name: "pg", key: "url" } });
    assert.deepEqual(env.POD_NAME, { fieldRef: { fieldPath: "metadata.name" } });
    assert.equal(env.NODE_OPTIONS, "--max-semi-space-size=8", "the worker's young generation");
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

  it("a command handler gets the worker's connection secrets only when the pool passes them", () => {
    const envOf = (handler: object) => {
      const p = pool({ ...base, handler });
      const c = desiredDeployment(p, p.spec, { defaultImage: "img" }).spec!.template!.spec!.containers[0]!;
      return c.env!.find((e) => e.name === "CONVEYOR_HANDLER_CREDENTIALS")?.value;
    };
    assert.equal(envOf({ command: ["/bin/ocr"] }), undefined);
    assert.equal(envOf({ command: ["/bin/ocr"], passCredentials: false }), undefined);
    assert.equal(envOf({ command: ["/bin/ocr"], passCredentials: true }), "true");
  });

  it("gives the workers of a pool with job records the operator's outbox byte budget, and others none", () => {
    const budgetOf = (spec: object, outboxMaxBytes?: number) => {
      const p = pool({ ...base, ...spec });
      const c = desiredDeployment(p, p.spec, { defaultImage: "img", outboxMaxBytes }).spec!.template!.spec!
        .containers[0]!;
      return c.env!.filter((e) => e.name === "CONVEYOR_OUTBOX_MAX_BYTES").map((e) => e.value);
    };
    const database = { database: { secretRef: { name: "pg", key: "url" } } };
    assert.deepEqual(budgetOf(database, 16 << 20), [String(16 << 20)]);
    assert.deepEqual(budgetOf(database), [], "unset: the worker's own default");
    assert.deepEqual(budgetOf({}, 16 << 20), [], "no records, no outbox");
  });

  it("takes the pool's own NODE_OPTIONS instead of the worker's default, once", () => {
    const p = pool({
      ...base,
      template: { env: [{ name: "NODE_OPTIONS", value: "--max-old-space-size=512" }] },
    });
    const c = desiredDeployment(p, p.spec, { defaultImage: "img" }).spec!.template!.spec!.containers[0]!;
    assert.deepEqual(
      c.env!.filter((e) => e.name === "NODE_OPTIONS"),
      [{ name: "NODE_OPTIONS", value: "--max-old-space-size=512" }],
    );
  });

  it("spec.notify: URL, events and allow as env, the secret a file of a Secret volume (never in the pod spec)", () => {
    const p = pool({
      ...base,
      notify: {
        url: "https://hooks.example.com/x",
        events: ["completed", "dead"],
        secretRef: { name: "webhook" },
        allow: ["10.20.0.0/16"],
      },
    });
    const d = desiredDeployment(p, p.spec, { defaultImage: "w:1" });
    const ps = d.spec!.template!.spec!;
    const c = ps.containers[0] as V1Container;
    const env = Object.fromEntries(c.env!.map((e) => [e.name, e.value]));
    assert.equal(env.CONVEYOR_NOTIFY_URL, "https://hooks.example.com/x");
    assert.equal(env.CONVEYOR_NOTIFY_EVENTS, "completed,dead");
    assert.equal(env.CONVEYOR_NOTIFY_ALLOW, "10.20.0.0/16");
    assert.equal(env.CONVEYOR_NOTIFY_SECRET_FILE, `${NOTIFY_DIR}/secret`);
    assert.deepEqual(ps.volumes?.find((v) => v.name === NOTIFY_VOLUME)?.secret, {
      secretName: "webhook",
      items: [{ key: "secret", path: "secret" }],
      defaultMode: 0o444,
    });
    assert.deepEqual(
      c.volumeMounts?.find((m) => m.name === NOTIFY_VOLUME),
      { name: NOTIFY_VOLUME, mountPath: NOTIFY_DIR, readOnly: true },
    );
    const plain = pool(base);
    const pc = desiredDeployment(plain, plain.spec, { defaultImage: "w:1" }).spec!.template!.spec!;
    assert.equal(
      pc.volumes?.some((v) => v.name === NOTIFY_VOLUME),
      false,
    );
    assert.equal(
      (pc.containers[0] as V1Container).env!.some((e) => e.name.startsWith("CONVEYOR_NOTIFY")),
      false,
    );
  });

  it("mounts only the declared keys of the resources' Secrets, read-only, and says where (no credential in env)", () => {
    const p = pool({
      ...base,
      resources: [
        {
          name: "openai",
          secretRef: { name: "openai-keys" },
          keys: [
            { id: "k1", limits: ["requests=60/m"] },
            { id: "k2", limits: ["requests=60/m"] },
          ],
        },
        { name: "internal", keys: [{ id: "a", limits: ["requests=5/s"] }] },
        { name: "ocr", secretRef: { name: "ocr" }, keys: [{ id: "main", limits: ["pages=100/m"] }] },
      ],
    });
    const ps = desiredDeployment(p, p.spec, { defaultImage: "img" }).spec!.template!.spec!;
    const c = ps.containers[0]!;
    assert.deepEqual(
      ps.volumes?.find((v) => v.name === RESOURCES_VOLUME),
      {
        name: RESOURCES_VOLUME,
        projected: {
          defaultMode: 0o444,
          sources: [
            {
              secret: {
                name: "openai-keys",
                items: [
                  { key: "k1", path: "openai/k1" },
                  { key: "k2", path: "openai/k2" },
                ],
              },
            },
            { secret: { name: "ocr", items: [{ key: "main", path: "ocr/main" }] } },
          ],
        },
      },
    );
    assert.deepEqual(
      c.volumeMounts?.find((m) => m.name === RESOURCES_VOLUME),
      { name: RESOURCES_VOLUME, mountPath: RESOURCES_DIR, readOnly: true },
    );
    assert.equal(c.env?.find((e) => e.name === "CONVEYOR_RESOURCES_DIR")?.value, RESOURCES_DIR);
    assert.ok(!c.env?.some((e) => e.valueFrom?.secretKeyRef?.name === "openai-keys"));
    // Without a Secret to mount: no volume, no variable (nothing rolls for pools without one).
    const plain = pool(base);
    const none = desiredDeployment(plain, plain.spec, { defaultImage: "img" }).spec!.template!.spec!;
    assert.ok(!none.volumes?.some((v) => v.name === RESOURCES_VOLUME));
    assert.ok(!none.containers[0]!.env?.some((e) => e.name === "CONVEYOR_RESOURCES_DIR"));
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

  it("a python handler: CONVEYOR_HANDLER python:…, the Python worker image unless the pool names one", () => {
    const p = pool({ ...base, handler: { python: { callable: "app.handlers:extract" } } });
    const d = desiredDeployment(p, p.spec, { defaultImage: "ghcr.io/conveyor-dev/conveyor-worker:0.1.0" });
    const c = d.spec!.template!.spec!.containers[0] as V1Container;
    assert.equal(c.env!.find((e) => e.name === "CONVEYOR_HANDLER")?.value, "python:app.handlers:extract");
    assert.equal(c.image, "ghcr.io/conveyor-dev/conveyor-worker-python:0.1.0");
    const set = desiredDeployment(p, p.spec, { defaultImage: "w:1", defaultPythonImage: "my/py-worker:2" });
    assert.equal(set.spec!.template!.spec!.containers[0]!.image, "my/py-worker:2");
    const own = pool({ ...base, handler: { python: { callable: "a:b" } }, template: { image: "mine:3" } });
    assert.equal(
      desiredDeployment(own, own.spec, { defaultImage: "w:1" }).spec!.template!.spec!.containers[0]!.image,
      "mine:3",
    );
    const js = desiredDeployment(pool(base), pool(base).spec, {
      defaultImage: "w:1",
      defaultPythonImage: "py:1",
    });
    assert.equal(js.spec!.template!.spec!.containers[0]!.image, "w:1");
    for (const [image, variant] of [
      ["ghcr.io/conveyor-dev/conveyor-worker:0.1.0", "ghcr.io/conveyor-dev/conveyor-worker-python:0.1.0"],
      ["localhost:5000/conveyor-worker:1", "localhost:5000/conveyor-worker-python:1"],
      ["conveyor-worker", "conveyor-worker-python"],
      ["r/conveyor-worker@sha256:ab", "r/conveyor-worker-python@sha256:ab"],
      ["r/conveyor-worker:1@sha256:ab", "r/conveyor-worker-python:1@sha256:ab"],
    ])
      assert.equal(pythonVariant(image!), variant);
  });

  it("handler and Redis URL forms", () => {
    assert.equal(handlerEnv({ command: ["/bin/convert", "-"] }), 'command:["/bin/convert","-"]');
    assert.equal(handlerEnv({ module: "/m.js" }), "module:/m.js");
    const tls = withDefaults({ ...base, redis: { url: "redis://r:6380", tls: true } });
    assert.equal(effectiveRedisUrl(tls), "rediss://r:6380");
    const cl = withDefaults({ ...base, redis: { url: "redis-cluster://a:1,b:2", tls: true } });
    assert.equal(effectiveRedisUrl(cl), "redis-cluster://a:1,b:2?tls=true");
    const sen = withDefaults({ ...base, redis: { url: "redis-sentinel://a:1,b:2/mymaster", tls: true } });
    assert.equal(effectiveRedisUrl(sen), "redis-sentinel://a:1,b:2/mymaster?tls=true");
    assert.equal(
      workerEnv(withDefaults(base)).find((e) => e.name === "CONVEYOR_DURABILITY"),
      undefined,
    );
    const replicated = withDefaults({ ...base, redis: { url: "redis://r:1", durability: "replicated" } });
    assert.equal(workerEnv(replicated).find((e) => e.name === "CONVEYOR_DURABILITY")?.value, "replicated");
    assert.equal(terminationGraceSeconds(withDefaults({ ...base, maxJobSeconds: 60, drainSeconds: 0 })), 10);
  });

  it("spec.batch reaches the worker as CONVEYOR_BATCH_SIZE/MIN/WAIT (worker/config.test.ts reads them back)", () => {
    const env = (extra: Record<string, unknown>) =>
      Object.fromEntries(
        workerEnv(withDefaults({ ...base, ...extra } as Parameters<typeof withDefaults>[0]))
          .filter((e) => e.name.startsWith("CONVEYOR_BATCH"))
          .map((e) => [e.name, e.value!]),
      );
    assert.deepEqual(env({}), {});
    const set = env({ batch: { size: 50, minSize: 10, waitMs: 200 } });
    assert.deepEqual(set, {
      CONVEYOR_BATCH_SIZE: "50",
      CONVEYOR_BATCH_MIN: "10",
      CONVEYOR_BATCH_WAIT: "200ms",
    });
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
