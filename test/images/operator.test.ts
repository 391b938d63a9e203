// The built conveyor-operator image as a container against the test control plane: host network
// (the API server listens on loopback), the kubeconfig mounted read-only, read-only root. It
// becomes leader (its Lease, its leader gauge) and reconciles a WorkerPool into a Deployment
// that runs the worker image it was given; SIGTERM stops it cleanly and releases the Lease.
import assert from "node:assert/strict";
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  buildImages,
  containersUnavailable,
  OPERATOR_IMAGE,
  runContainer,
  type Container,
} from "../support/containers.ts";
import { pollUntil } from "../support/poll.ts";
import { ControlPlane } from "../support/controlplane.ts";
import { parseMetrics } from "../support/operator.ts";
import { freePort } from "../support/ports.ts";
import { RedisServer } from "../support/redis.ts";
import { REPO } from "../support/workers.ts";

const skip = containersUnavailable();

describe("conveyor-operator image", { skip, timeout: 40 * 60_000 }, () => {
  let cp: ControlPlane;
  let redis: RedisServer;
  let dir: string;
  let op: Container;
  let metricsPort: number;
  const identity = `image-operator-${process.pid}`;
  const log = () => {
    try {
      return readFileSync(join(dir, "operator.log"), "utf8").slice(-3000);
    } catch {
      return "";
    }
  };

  before(async () => {
    const [, started] = await Promise.all([
      buildImages(),
      ControlPlane.start({ controllers: false, scheduler: false, kwok: false, aggregation: false }),
    ]);
    cp = started;
    await cp.kubectl("apply", "--server-side", "-f", join(REPO, "crds", "conveyor.dev_workerpools.yaml"));
    await cp.waitForCrd("workerpools.conveyor.dev");
    redis = await RedisServer.start();
    dir = mkdtempSync(join(tmpdir(), "cvy-image-operator-"));
    // the container's uid 65532 reads the kubeconfig (the control plane writes it 0600 for root)
    copyFileSync(cp.kubeconfigPath, join(dir, "kubeconfig"));
    chmodSync(join(dir, "kubeconfig"), 0o644);
    chmodSync(dir, 0o755);
  });
  after(async () => {
    await op?.stop(5);
    await redis?.stop();
    await cp?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("starts against the control plane, leads, reconciles a WorkerPool into a Deployment", async () => {
    metricsPort = await freePort();
    const metricsApiPort = await freePort();
    op = runContainer({
      image: OPERATOR_IMAGE,
      name: identity,
      volumes: { [join(dir, "kubeconfig")]: "/etc/conveyor/kubeconfig:ro" },
      args: [
        "operator",
        "--kubeconfig=/etc/conveyor/kubeconfig",
        `--identity=${identity}`,
        "--metrics-address=127.0.0.1",
        `--metrics-port=${metricsPort}`,
        "--metrics-api-address=127.0.0.1",
        `--metrics-api-port=${metricsApiPort}`,
        "--metrics-api-client-ca=none",
        "--leader-election-namespace=default",
        "--worker-image=localhost/conveyor-worker:test",
      ],
      logFile: join(dir, "operator.log"),
    });
    await pollUntil(
      "operator container /readyz",
      async () => {
        if (op.child.exitCode !== null) throw new Error(`operator exited ${op.child.exitCode}: ${log()}`);
        return (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).ok;
      },
      { timeoutMs: 180_000 },
    );
    await pollUntil(
      "the container leads",
      async () => {
        const m = parseMetrics(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text());
        const holder = (
          await cp.kubectl("get", "lease", "conveyor-operator", "-o", "jsonpath={.spec.holderIdentity}")
        ).trim();
        return m.get("conveyor_operator_leader") === 1 && holder === identity;
      },
      { timeoutMs: 120_000 },
    );
    assert.equal((await op.exec("id", "-u")).trim(), "65532");

    await cp.apply(
      JSON.stringify({
        apiVersion: "conveyor.dev/v1alpha1",
        kind: "WorkerPool",
        metadata: { name: "image-pool", namespace: "default" },
        spec: {
          queue: "image-pool",
          redis: { url: redis.url },
          handler: { module: "/handlers/h.js" },
          scaling: { minReplicas: 1, maxReplicas: 3 },
        },
      }),
    );
    const deployment = await pollUntil(
      "the pool's Deployment",
      async () => {
        const out = await cp.kubectl(
          "get",
          "deployments",
          "-l",
          "conveyor.dev/workerpool=image-pool",
          "-o",
          "json",
        );
        const items = (
          JSON.parse(out) as {
            items: {
              spec: {
                replicas?: number;
                template: {
                  spec: { containers: { image: string; env?: { name: string; value?: string }[] }[] };
                };
              };
            }[];
          }
        ).items;
        return items[0];
      },
      { timeoutMs: 120_000 },
    );
    const container = deployment.spec.template.spec.containers[0]!;
    assert.equal(container.image, "localhost/conveyor-worker:test");
    assert.equal(
      container.env?.find((e: { name: string; value?: string }) => e.name === "CONVEYOR_QUEUE")?.value,
      "image-pool",
    );
    await pollUntil(
      "WorkerPool status observed",
      async () =>
        (
          await cp.kubectl("get", "wp", "image-pool", "-o", "jsonpath={.status.observedGeneration}")
        ).trim() === "1",
      { timeoutMs: 120_000 },
    );

    // SIGTERM: exit 0 and the Lease released for a standby
    assert.equal(await op.stop(30), 0, log());
    const holder = (
      await cp.kubectl("get", "lease", "conveyor-operator", "-o", "jsonpath={.spec.holderIdentity}")
    ).trim();
    assert.notEqual(holder, identity, "the Lease was released on shutdown");
  });
});
