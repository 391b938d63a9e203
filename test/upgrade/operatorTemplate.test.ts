// Upgrading only the operator must leave every worker pod running: the pod template this release's
// operator makes for a pool equals the one the previous release's made (a different template is a
// new ReplicaSet, and every worker pod rolls). Both releases' own code (operator/controllers/
// deployment.ts and the spec defaults) is run on the same WorkerPools; the real-node run
// (`make upgrade-demo`) checks the same on a cluster with pod UIDs.
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { desiredDeployment } from "../../operator/controllers/deployment.ts";
import { withDefaults, type WorkerPool } from "../../operator/apis/v1alpha1/types.ts";
import { POOLS, workerPoolManifest } from "../e2e/scenario.ts";
import { previousRelease } from "../support/releases.ts";

const PREVIOUS = previousRelease();
type Build = (
  pool: unknown,
  spec: unknown,
  opts: { defaultImage: string },
) => { spec: { template: unknown } };

const IMAGE = "ghcr.io/conveyor-dev/conveyor-worker:0.1.0";
/** WorkerPools as users write them: the demo's two, and ones with every field the previous release knows. */
const pools: { name: string; manifest: { metadata: object; spec: object } }[] = [
  ...POOLS.map((p) => ({
    name: `the demo's ${p.name}`,
    manifest: workerPoolManifest(p, {
      redisUrl: "redis://10.0.0.1:6379",
      handler: "/handlers/recordingHandler.js",
      template: {
        imagePullPolicy: "Never",
        env: [{ name: "EXEC_LOG", value: "/out/executions.ndjson" }],
        volumes: [{ name: "out", hostPath: { path: "/tmp/out" } }],
        volumeMounts: [{ name: "out", mountPath: "/out" }],
      },
    }) as { metadata: object; spec: object },
  })),
  {
    name: "an http handler, a password, durability, resources and sidecar",
    manifest: {
      metadata: { name: "full", namespace: "team" },
      spec: {
        queue: "p/full",
        redis: {
          url: "redis://redis:6379",
          secretRef: { name: "redis", key: "password" },
          durability: "replicated",
        },
        handler: { http: { port: 8080, path: "/run" }, passCredentials: true },
        concurrency: 3,
        template: {
          image: "example.com/worker:1",
          labels: { team: "a" },
          annotations: { note: "x" },
          resources: { requests: { cpu: "100m" } },
          containers: [{ name: "app", image: "example.com/app:1" }],
          nodeSelector: { disk: "ssd" },
        },
        resources: [{ name: "api", secretRef: { name: "api-keys" }, keys: [{ id: "k1" }, { id: "k2" }] }],
      },
    },
  },
  {
    name: "a command handler",
    manifest: {
      metadata: { name: "cmd", namespace: "default" },
      spec: {
        queue: "p/cmd",
        redis: { url: "redis://redis:6379" },
        handler: { command: ["python3", "h.py"] },
      },
    },
  },
];

describe("the worker pod template across an operator upgrade", () => {
  test("this release's operator makes the same pod template as the previous release's for every pool", async () => {
    const previous = (await import(join(PREVIOUS.dir, "operator/controllers/deployment.ts"))) as {
      desiredDeployment: Build;
    };
    const previousTypes = (await import(join(PREVIOUS.dir, "operator/apis/v1alpha1/types.ts"))) as {
      withDefaults: (spec: unknown) => unknown;
    };
    for (const { name, manifest } of pools) {
      const pool = {
        apiVersion: "conveyor.dev/v1alpha1",
        kind: "WorkerPool",
        ...manifest,
        metadata: { uid: "0b1c", generation: 1, ...manifest.metadata },
      } as unknown as WorkerPool;
      let before: unknown;
      try {
        before = previous.desiredDeployment(
          pool,
          previousTypes.withDefaults(structuredClone(manifest.spec)),
          {
            defaultImage: IMAGE,
          },
        ).spec.template;
      } catch (err) {
        // a field the previous release does not know is not part of this comparison
        throw new Error(`${name}: the previous release cannot build it: ${(err as Error).message}`);
      }
      const after = desiredDeployment(pool, withDefaults(structuredClone(manifest.spec) as never), {
        defaultImage: IMAGE,
      }).spec!.template;
      assert.deepEqual(after, before, `${name}: the pod template changed`);
    }
  });
});
