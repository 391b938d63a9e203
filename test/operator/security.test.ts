// Redis credentials never leave their Secret (issue 7, DESIGN §4 "credentials only through
// Secret references"): a password-protected Redis, WorkerPools with `spec.redis.secretRef` — one
// right, one with a wrong password, one with none — the operator as a process, and real
// `conveyor worker` processes following the pods (test/support/podRunner.ts: REDIS_PASSWORD
// from the Secret, as a kubelet gives it). Jobs make the good pool scale 0 → 1 → 0; the bad ones
// make the operator and a worker fail authentication over and over; with --restrict-secret-access
// a pool naming an unlabelled Secret is Degraded/SecretNotPermitted and the operator never sends
// it. Then neither password — nor its base64 or URL-encoded form — may appear in the operator's or the workers' output, Events,
// WorkerPool status, the worker Deployments, the operator's /metrics and external metrics API,
// or the workers' /metrics.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import * as https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ControlPlane } from "../support/controlplane.ts";
import { pollUntil } from "../support/poll.ts";
import { RedisServer } from "../support/redis.ts";
import { freePort } from "../support/ports.ts";
import { stopProcess } from "../support/processes.ts";
import { type PodRunner, startPoolPodRunner } from "../support/podRunner.ts";
import { RECORDING_HANDLER } from "../support/workers.ts";
import {
  isLeader,
  operatorAlive,
  operatorLog,
  operatorMetricsText,
  startOperator,
  type OperatorProcess,
} from "../support/operator.ts";
import { Producer, QueueAdmin, connectRedis, type RedisClient } from "../../queue/index.ts";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import type { WorkerPool } from "../../operator/apis/v1alpha1/types.ts";
import type { Deployment } from "../../operator/controllers/objects.ts";

const ROOT = join(import.meta.dirname, "../..");
const LONG = 240_000;
// URL-special characters on purpose: the encoded form differs from the plain one.
const PASSWORD = `Zq7!p@ss:w/rd+${randomBytes(6).toString("hex")}%`;
const WRONG = `Wr0ng-${randomBytes(6).toString("hex")}:p@ss/wörd`;

/** Every form a credential could leak in. */
function forms(secret: string): string[] {
  const b64 = Buffer.from(secret).toString("base64");
  return [
    secret,
    b64,
    b64.replace(/=+$/, ""),
    Buffer.from(secret).toString("base64url"),
    encodeURIComponent(secret),
    encodeURI(secret),
    JSON.stringify(secret).slice(1, -1),
  ];
}
const NEEDLES = [...new Set([...forms(PASSWORD), ...forms(WRONG)])];

function assertNoCredential(where: string, text: string): void {
  assert.ok(text.length > 0, `${where}: there is something to check`);
  for (const needle of NEEDLES) {
    const i = text.indexOf(needle);
    assert.equal(
      i,
      -1,
      `${where} contains a credential (${JSON.stringify(needle)}) at ${i}: …${text.slice(Math.max(0, i - 200), i + needle.length + 50)}…`,
    );
  }
}

function httpsGet(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { rejectUnauthorized: false, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }),
      );
      res.on("error", reject);
    });
    req.setTimeout(10_000, () => req.destroy(new Error(`timeout: ${url}`)));
    req.on("error", reject);
  });
}

describe("credentials never appear in logs, Events, status or metrics", { timeout: 15 * 60_000 }, () => {
  let cp: ControlPlane;
  let k: KubeClient;
  let redis: RedisServer;
  let r: RedisClient;
  let op: OperatorProcess;
  let runner: PodRunner;
  let dir: string;
  let metricsApiPort: number;
  /** What was read from the workers' /metrics while they ran. */
  const workerMetrics = new Map<string, string>();

  const getPool = (name: string) =>
    k.get<WorkerPool>(resourcePath(RESOURCES.workerPools, { namespace: "default", name }));
  const getDeployment = (name: string) =>
    k.get<Deployment>(resourcePath(RESOURCES.deployments, { namespace: "default", name }));
  const condition = (p: WorkerPool | null, type: string) =>
    p?.status?.conditions?.find((c) => c.type === type);

  function pool(name: string, spec: Record<string, unknown>) {
    return {
      apiVersion: "conveyor.dev/v1alpha1",
      kind: "WorkerPool",
      metadata: { name, namespace: "default" },
      spec: {
        queue: `${name}/work`,
        redis: { url: redis.url },
        handler: { module: RECORDING_HANDLER.slice("module:".length) },
        maxJobSeconds: 30,
        drainSeconds: 5,
        template: { env: [{ name: "LOG_LEVEL", value: "debug" }] },
        ...spec,
      },
    };
  }

  async function scrapeWorkers(): Promise<void> {
    for (const p of runner.running) {
      try {
        const text = await (await fetch(`http://127.0.0.1:${p.port}/metrics`)).text();
        if (text) workerMetrics.set(p.name, text);
      } catch {
        // not listening yet, or already gone
      }
    }
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "cvy-security-"));
    cp = await ControlPlane.start({ controllers: true, scheduler: true, kwok: true, aggregation: false });
    k = new KubeClient(cp.kubeConfig());
    await cp.kubectl("apply", "--server-side", "-f", join(ROOT, "crds", "conveyor.dev_workerpools.yaml"));
    await cp.waitForCrd("workerpools.conveyor.dev");
    redis = await RedisServer.start({ password: PASSWORD });
    r = connectRedis(redis.url.replace("redis://", `redis://:${encodeURIComponent(PASSWORD)}@`));
    await cp.kubectl("create", "secret", "generic", "redis-auth", `--from-literal=password=${PASSWORD}`);
    await cp.kubectl("create", "secret", "generic", "redis-wrong", `--from-literal=password=${WRONG}`);
    // the right password in a Secret not labelled for Conveyor: with --restrict-secret-access
    // the operator must not send it anywhere
    await cp.kubectl(
      "create",
      "secret",
      "generic",
      "redis-unlabelled",
      `--from-literal=password=${PASSWORD}`,
    );
    await cp.kubectl("label", "secret", "redis-auth", "redis-wrong", "conveyor.dev/secret-access=true");
    metricsApiPort = await freePort();
    // the external metrics API on loopback with a self-signed certificate and no client check:
    // read directly here (its error texts name the pool's Redis problem)
    op = await startOperator(cp, "security", [
      "--metrics-api-address=127.0.0.1",
      `--metrics-api-port=${metricsApiPort}`,
      "--metrics-api-hosts=127.0.0.1",
      "--metrics-api-client-ca=none",
      "--restrict-secret-access",
    ]);
    await pollUntil("the operator leads", () => isLeader(op), { timeoutMs: LONG });
    runner = startPoolPodRunner(cp.kubeConfig(), dir, join(dir, "executions.ndjson"));
  });

  after(async () => {
    await runner?.stop();
    r?.disconnect();
    if (op) await stopProcess(op.proc, 10_000);
    await redis?.stop();
    await cp?.stop();
    if (dir && process.env.CONVEYOR_KEEP_TMP !== "1") rmSync(dir, { recursive: true, force: true });
  });

  it("a pool with the right password scales 0 → 1 → 0 and its worker runs the jobs; wrong or missing passwords make pools Degraded and a worker fail; an unlabelled Secret is not used (--restrict-secret-access)", async () => {
    const apply = async (obj: unknown) => {
      await cp.apply(JSON.stringify(obj), "--server-side", "--field-manager=tester");
    };
    await apply(
      pool("secure", {
        redis: { url: redis.url, secretRef: { name: "redis-auth" } },
        scaling: {
          mode: "direct",
          maxReplicas: 2,
          targetBacklogPerReplica: 20,
          pollSeconds: 1,
          cooldownSeconds: 5,
        },
      }),
    );
    // a wrong password, pinned at one replica so that a worker runs with it too
    await apply(
      pool("wrongpass", {
        redis: { url: redis.url, secretRef: { name: "redis-wrong" } },
        replicas: 1,
        scaling: { pollSeconds: 1 },
      }),
    );
    // no password at all against a Redis that requires one
    await apply(pool("nopass", { scaling: { mode: "direct", pollSeconds: 1 } }));
    // a Secret the operator may not use (--restrict-secret-access)
    await apply(
      pool("unpermitted", {
        redis: { url: redis.url, secretRef: { name: "redis-unlabelled" } },
        scaling: { mode: "direct", pollSeconds: 1 },
      }),
    );

    const dep = await pollUntil(
      "secure's Deployment",
      async () => (await getDeployment("secure")) ?? undefined,
      { timeoutMs: LONG },
    );
    const env = dep.spec!.template!.spec!.containers.find((c) => c.name === "worker")!.env!;
    assert.deepEqual(
      env.find((e) => e.name === "REDIS_PASSWORD")?.valueFrom,
      { secretKeyRef: { name: "redis-auth", key: "password" } },
      "the password only as a Secret reference",
    );
    await pollUntil(
      "secure Ready at zero",
      async () => condition(await getPool("secure"), "Ready")?.reason === "ScaledToZero",
      { timeoutMs: LONG },
    );

    const producer = new Producer(r);
    const admin = new QueueAdmin(r);
    await producer.enqueueMany(
      "secure/work",
      Array.from({ length: 40 }, (_, i) => ({ data: { i, sleepMs: 100 } })),
    );
    await pollUntil(
      "secure scales up and its worker runs",
      async () => {
        const d = await getDeployment("secure");
        return (d?.spec?.replicas ?? 0) >= 1 && runner.running.some((p) => p.name.startsWith("secure-"));
      },
      { timeoutMs: LONG },
    );
    await pollUntil(
      "all 40 jobs completed by the worker (it authenticated with the Secret's password)",
      async () => {
        await scrapeWorkers();
        return (await admin.counts("secure/work")).completed >= 40;
      },
      { timeoutMs: LONG, intervalMs: 500 },
    );
    await scrapeWorkers();

    for (const [name, reason] of [
      ["wrongpass", "RedisUnreachable"],
      ["nopass", "RedisUnreachable"],
      ["unpermitted", "SecretNotPermitted"],
    ] as const) {
      await pollUntil(
        `${name} Degraded/${reason} with an Event`,
        async () => {
          const p = await getPool(name);
          const d = condition(p, "Degraded");
          if (d?.status !== "True" || d.reason !== reason) return false;
          const ev = JSON.parse(
            await cp.kubectl(
              "get",
              "events",
              "--field-selector",
              `involvedObject.name=${name},involvedObject.kind=WorkerPool`,
              "-o",
              "json",
            ),
          ) as { items: { reason: string }[] };
          return ev.items.some((e) => e.reason === reason);
        },
        { timeoutMs: LONG },
      );
    }
    assert.match(
      condition(await getPool("unpermitted"), "Degraded")!.message,
      /Secret redis-unlabelled \(Redis password\) is not labelled conveyor\.dev\/secret-access=true/,
    );
    const wrong = await getPool("wrongpass");
    assert.match(
      condition(wrong, "Degraded")!.message,
      /WRONGPASS|invalid username-password|NOAUTH|auth/i,
      "the auth failure is reported",
    );
    // the wrong password's worker tried and failed (the pod runner started it with REDIS_PASSWORD=<wrong>)
    await pollUntil(
      "the wrongpass worker ran and logged its auth failure",
      async () => {
        await scrapeWorkers();
        return runner.history.some(
          (p) =>
            p.name.startsWith("wrongpass-") &&
            /WRONGPASS|invalid username-password|NOAUTH/i.test(readFileSync(p.logFile, "utf8")),
        );
      },
      { timeoutMs: LONG },
    );

    await pollUntil(
      "secure back to 0 after the cooldown and its worker gone",
      async () =>
        (await getDeployment("secure"))?.spec?.replicas === 0 &&
        !runner.running.some((p) => p.name.startsWith("secure-")),
      { timeoutMs: LONG },
    );
    assert.ok(workerMetrics.size > 0, "worker /metrics were read while they ran");
    assert.ok(await operatorAlive(op));
  });

  it("neither password — plain, base64 or URL-encoded — in operator or worker output, Events, status, Deployments, or any /metrics", async () => {
    // the external metrics API: a good pool's value, a failing pool's error text
    const ext = (name: string) =>
      httpsGet(
        `https://127.0.0.1:${metricsApiPort}/apis/external.metrics.k8s.io/v1beta1/namespaces/default/conveyor-backlog?labelSelector=workerpool%3D${name}`,
      );
    const good = await ext("secure");
    assert.equal(good.status, 200, good.body);
    const bad = await ext("wrongpass");
    assert.equal(bad.status, 503, bad.body);

    // the checker itself: it finds the base64 form in the Secret
    const secretData = JSON.stringify(
      (JSON.parse(await cp.kubectl("get", "secret", "redis-auth", "-o", "json")) as { data: unknown }).data,
    );
    assert.throws(() => assertNoCredential("the Secret", secretData), /contains a credential/);

    const opLog = operatorLog(op);
    assert.match(
      opLog,
      /WRONGPASS|invalid username-password|NOAUTH/i,
      "the operator did log the auth failures",
    );
    const checks: [string, string][] = [
      ["operator stdout/stderr", opLog],
      ["operator /metrics", await operatorMetricsText(op)],
      ["external metrics API (secure)", good.body],
      ["external metrics API (wrongpass)", bad.body],
      ["kubectl get events -A -o json", await cp.kubectl("get", "events", "-A", "-o", "json")],
      ["kubectl get workerpools -A -o json", await cp.kubectl("get", "workerpools", "-A", "-o", "json")],
      ["kubectl get deployments -A -o json", await cp.kubectl("get", "deployments", "-A", "-o", "json")],
      ["kubectl get pods -A -o json", await cp.kubectl("get", "pods", "-A", "-o", "json")],
    ];
    for (const p of runner.history) checks.push([`worker log ${p.name}`, readFileSync(p.logFile, "utf8")]);
    for (const [name, text] of workerMetrics) checks.push([`worker /metrics ${name}`, text]);
    assert.ok(
      runner.history.length >= 2,
      "worker processes of both the good and the wrong-password pool ran",
    );
    for (const [where, text] of checks) assertNoCredential(where, text);
    process.stderr.write(
      `security: ${checks.length} sources checked (${runner.history.length} worker logs, ${workerMetrics.size} worker /metrics) for ${NEEDLES.length} forms of 2 passwords\n`,
    );
  });
});
