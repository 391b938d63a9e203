// The worker image as a real pod under a real kubelet (test/support/node.ts): one JSON log line
// per job through `kubectl logs -l`, the securityContext enforced by the runtime, and warm
// shutdown — a pod deleted mid-job finishes its job within the grace period and exits 0 as the
// kubelet reports; a job longer than the drain window is handed back, not failed.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { CoreV1Api, Watch, type V1Pod } from "@kubernetes/client-node";
import { pollUntil } from "../support/poll.ts";
import { buildImages, WORKER_IMAGE } from "../support/containers.ts";
import { ControlPlane } from "../support/controlplane.ts";
import { RealNode, hostState, nodeFootprint, nodeUnavailable, type HostState } from "../support/node.ts";
import { RedisServer } from "../support/redis.ts";
import { connectRedis, Producer, QueueAdmin } from "../../queue/index.ts";
import { REPO } from "../support/workers.ts";

const skip = nodeUnavailable();
let cp: ControlPlane;
let node: RealNode;
let redisServer: RedisServer;
let redis: ReturnType<typeof connectRedis>;
let producer: Producer;
let admin: QueueAdmin;
let core: CoreV1Api;
let hostBefore: HostState;

before(async () => {
  if (skip) return;
  hostBefore = await hostState();
  await buildImages();
  cp = await ControlPlane.start({ scheduler: true });
  node = await RealNode.start(cp);
  const t0 = Date.now();
  await node.importImage(WORKER_IMAGE);
  console.log(`worker image imported into containerd in ${Date.now() - t0} ms`);
  redisServer = await RedisServer.start({ extraBind: [node.address] });
  redis = connectRedis(redisServer.url);
  producer = new Producer(redis);
  admin = new QueueAdmin(redis);
  core = cp.kubeConfig().makeApiClient(CoreV1Api);
});
after(async () => {
  redis?.disconnect();
  await node?.stop();
  await redisServer?.stop();
  await cp?.stop();
  if (!skip) assert.deepEqual(nodeFootprint(hostBefore, await hostState(), node), [], "host unchanged");
});

/** A worker pod as the chart's template makes one: non-root, read-only root, no capabilities. */
async function workerPod(name: string, o: { graceSeconds: number; drainSeconds: number }): Promise<V1Pod> {
  const created = Date.now();
  await core.createNamespacedPod({
    namespace: "default",
    body: {
      metadata: { name, labels: { "conveyor.dev/workerpool": name } },
      spec: {
        terminationGracePeriodSeconds: o.graceSeconds,
        securityContext: { runAsNonRoot: true },
        volumes: [{ name: "handlers", hostPath: { path: join(REPO, "test", "fixtures") } }],
        containers: [
          {
            name: "worker",
            image: WORKER_IMAGE,
            imagePullPolicy: "Never",
            env: [
              { name: "CONVEYOR_QUEUE", value: name }, // a queue per pod: one test's pod never takes another's jobs
              { name: "CONVEYOR_HANDLER", value: "module:/handlers/recordingHandler.js" },
              { name: "REDIS_URL", value: `redis://${node.address}:${redisServer.port}` },
              { name: "CONVEYOR_DRAIN_SECONDS", value: String(o.drainSeconds) },
            ],
            volumeMounts: [{ name: "handlers", mountPath: "/handlers", readOnly: true }],
            // as the chart's template: the kubelet asks the worker whether it takes new jobs
            readinessProbe: {
              httpGet: { path: "/readyz", port: 9464 },
              periodSeconds: 1,
              failureThreshold: 1,
            },
            securityContext: {
              readOnlyRootFilesystem: true,
              allowPrivilegeEscalation: false,
              capabilities: { drop: ["ALL"] },
            },
          },
        ],
      },
    },
  });
  const pod = await pollUntil(
    `pod ${name} Ready`,
    async () => {
      const p = await core.readNamespacedPod({ name, namespace: "default" });
      return p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") && p;
    },
    { onTimeout: () => node.logTail() },
  );
  console.log(`pod ${name} create → Ready: ${Date.now() - created} ms`);
  return pod;
}

/** Deletes a pod and resolves the worker container's exit code as the kubelet reported it. */
async function deleteAndWatchExit(name: string): Promise<number> {
  let exitCode: number | undefined;
  let gone!: () => void;
  const deleted = new Promise<void>((r) => (gone = r));
  const req = await new Watch(cp.kubeConfig()).watch(
    "/api/v1/namespaces/default/pods",
    { fieldSelector: `metadata.name=${name}` },
    (type: string, pod: V1Pod) => {
      const t = pod.status?.containerStatuses?.[0]?.state?.terminated;
      if (t) exitCode = t.exitCode;
      if (type === "DELETED") gone();
    },
    () => {},
  );
  await core.deleteNamespacedPod({ name, namespace: "default" });
  await deleted;
  req.abort();
  assert.notEqual(exitCode, undefined, `the kubelet reported ${name}'s container as terminated`);
  return exitCode!;
}

const job = (id: string, queue: string) => admin.job(id, queue);

test(
  "the worker image runs as a real pod: one JSON log line per job, securityContext enforced",
  { skip },
  async () => {
    await workerPod("logs", { graceSeconds: 30, drainSeconds: 20 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await producer.enqueue("logs", { sleepMs: 50 })).id);
    await pollUntil("3 jobs completed", async () => {
      for (const id of ids) if ((await job(id, "logs"))?.state !== "completed") return false;
      return true;
    });
    const logs = await cp.kubectl("logs", "-l", "conveyor.dev/workerpool=logs", "--tail=-1");
    for (const id of ids) {
      const lines = logs.split("\n").filter((l) => l.includes(id));
      assert.equal(lines.length, 1, `one log line for job ${id}:\n${logs}`);
      assert.doesNotThrow(() => JSON.parse(lines[0]!), `a JSON line: ${lines[0]}`);
    }
    // what the runtime enforces, seen from inside the container
    const probe = await cp.kubectl(
      "exec",
      "logs",
      "--",
      "node",
      "-e",
      `const fs = require("fs");
     let write = "allowed";
     try { fs.writeFileSync("/probe", "x"); } catch (e) { write = e.code; }
     const capEff = /CapEff:\\s*(\\w+)/.exec(fs.readFileSync("/proc/self/status", "utf8"))[1];
     console.log(JSON.stringify({ uid: process.getuid(), write, capEff }));`,
    );
    assert.deepEqual(JSON.parse(probe), { uid: 65532, write: "EROFS", capEff: "0000000000000000" });
    assert.equal(await deleteAndWatchExit("logs"), 0);
  },
);

test("a pod deleted mid-job finishes the job within the grace period and exits 0", { skip }, async () => {
  await workerPod("warm", { graceSeconds: 30, drainSeconds: 20 });
  const { id } = await producer.enqueue("warm", { sleepMs: 6000 });
  await pollUntil(`job ${id} active`, async () => (await job(id, "warm"))?.state === "active");
  const t0 = Date.now();
  assert.equal(await deleteAndWatchExit("warm"), 0, "the worker drained and exited 0");
  const done = await job(id, "warm");
  assert.equal(done?.state, "completed", "the job finished in the terminating pod");
  assert.equal(done?.handbacks, 0, "not handed back: it ran once");
  assert.equal(done?.stalls, 0, "its lease never expired");
  assert.ok(Date.now() - t0 < 30_000, "inside the grace period, not ended by SIGKILL");
});

test("a job longer than the drain window is handed back, not failed; the pod exits 0", { skip }, async () => {
  await workerPod("handback", { graceSeconds: 20, drainSeconds: 2 });
  const { id } = await producer.enqueue("handback", { sleepMs: 120_000 });
  await pollUntil(`job ${id} active`, async () => (await job(id, "handback"))?.state === "active");
  assert.equal(await deleteAndWatchExit("handback"), 0);
  const back = await job(id, "handback");
  assert.equal(back?.state, "ready", `handed back to the queue: ${JSON.stringify(back)}`);
  assert.equal(back?.handbacks, 1);
  assert.equal(back?.attemptsMade, 0, "not counted as a failed attempt");
  await admin.cancel(id, "handback");
});

test("readiness goes false while Redis is away and true when it is back", { skip }, async () => {
  await workerPod("ready", { graceSeconds: 30, drainSeconds: 20 });
  const ready = async () =>
    (await core.readNamespacedPod({ name: "ready", namespace: "default" })).status?.conditions?.find(
      (c) => c.type === "Ready",
    )?.status;
  await redisServer.kill();
  try {
    await pollUntil("pod ready not Ready while Redis is away", async () => (await ready()) === "False");
  } finally {
    await redisServer.resume();
  }
  await pollUntil("pod ready Ready again", async () => (await ready()) === "True");
  const { id } = await producer.enqueue("ready", { sleepMs: 10 });
  await pollUntil(
    `job ${id} completed after Redis came back`,
    async () => (await job(id, "ready"))?.state === "completed",
  );
  assert.equal(await deleteAndWatchExit("ready"), 0);
});
