// The operator switches job records on for a pool with spec.database when it reconciles it, before
// any pod starts: jobs enqueued while the pool sits at zero are recorded from their enqueue, so a
// worker with --database that starts after them finds every one by a first-stage field. A real
// control plane, Redis, PostgreSQL and a `conveyor worker` process (playing the pool's pod);
// waits are polls.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type pg from "pg";
import { JobRecords } from "../../api/records.ts";
import { pollUntil } from "../support/poll.ts";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import type { Deployment } from "../../operator/controllers/objects.ts";
import type { KubeClient } from "../../operator/kube/client.ts";
import { PipelineKeys, Producer, type RedisClient } from "../../queue/index.ts";
import { createPool } from "../../records/index.ts";
import type { ControlPlane } from "../support/controlplane.ts";
import {
  startPoolHarness,
  workerPoolEvents,
  workerPoolManifest,
  type PoolHarness,
} from "../support/operator.ts";
import { PostgresServer } from "../support/postgres.ts";
import { stopProcess } from "../support/processes.ts";
import type { RedisServer } from "../support/redis.ts";
import { RECORDING_HANDLER, startWorker, type WorkerProcess } from "../support/workers.ts";

const LONG = 240_000;
const JOBS = 100;

describe("operator: job records", { timeout: 15 * 60_000 }, () => {
  let h: PoolHarness;
  let cp: ControlPlane;
  let k: KubeClient;
  let redisServer: RedisServer;
  let pgServer: PostgresServer;
  let redis: RedisClient;
  let pool: pg.Pool;
  let dir: string;
  let worker: WorkerProcess | undefined;

  before(async () => {
    h = await startPoolHarness("records", {
      beforeOperator: async (cp) => {
        pgServer = await PostgresServer.start();
        pool = createPool(pgServer.url, { maxConnections: 2 });
        dir = mkdtempSync(join(tmpdir(), "cvy-op-records-"));
        await cp.kubectl("create", "secret", "generic", "records-db", `--from-literal=url=${pgServer.url}`);
      },
    });
    ({ cp, k, redis: redisServer, r: redis } = h);
  });
  after(async () => {
    if (worker) await stopProcess(worker, 5000);
    await h?.stop();
    await pool?.end();
    await pgServer?.stop();
    if (dir && !process.env.CONVEYOR_KEEP_TMP) rmSync(dir, { recursive: true, force: true });
  });

  it("a pool with spec.database: records on at its first reconcile (one RecordsOn Event); jobs enqueued at zero replicas are all found after a worker with --database starts", async () => {
    const name = "recorded";
    const pipeline = name;
    const queue = `${name}/work`;
    const meta = new PipelineKeys(pipeline).meta;
    assert.equal(await redis.hget(meta, "records"), null);
    const res = await cp.run("kubectl", [`--kubeconfig=${cp.kubeconfigPath}`, "apply", "-f", "-"], {
      input: JSON.stringify(
        workerPoolManifest(name, redisServer.url, {
          database: { secretRef: { name: "records-db" } },
          scaling: { mode: "direct", minReplicas: 0, maxReplicas: 2, pollSeconds: 1 },
        }),
      ),
      check: false,
    });
    assert.equal(res.code, 0, `${res.stdout}${res.stderr}`);
    await pollUntil(
      "records on in the pool's Redis",
      async () => (await redis.hget(meta, "records")) === "1",
      {
        timeoutMs: LONG,
      },
    );
    await pollUntil(
      "the pool's Deployment, at zero replicas (no pod has started)",
      async () =>
        (await k.get<Deployment>(resourcePath(RESOURCES.deployments, { namespace: "default", name })))?.spec
          ?.replicas === 0,
      { timeoutMs: LONG },
    );
    const events = await pollUntil(
      "the RecordsOn Event",
      async () => {
        const e = (await workerPoolEvents(k, "default", name)).filter((x) => x.reason === "RecordsOn");
        return e.length > 0 ? e : null;
      },
      { timeoutMs: LONG },
    );
    assert.match(events[0]!.message, /job records switched on for pipeline recorded/);

    await new Producer(redis).enqueueMany(
      queue,
      Array.from({ length: JOBS }, (_, n) => ({ id: `j${n}`, data: { batch: pipeline, n } })),
    );
    worker = await startWorker({
      dir,
      name: "recorded-pod",
      env: {
        REDIS_URL: redisServer.url,
        DATABASE_URL: pgServer.url,
        CONVEYOR_QUEUE: queue,
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        CONVEYOR_CONCURRENCY: "8",
        LOG_LEVEL: "info",
      },
    });
    await pollUntil(
      "every job recorded as completed",
      async () => {
        const r = await pool.query<{ n: string }>(
          "SELECT count(*) AS n FROM conveyor_jobs WHERE pipeline = $1 AND state = 'completed'",
          [pipeline],
        );
        return Number(r.rows[0]!.n) === JOBS;
      },
      { timeoutMs: LONG },
    );
    const found = await new JobRecords(pool).byField({ path: ["batch"], value: pipeline, limit: 2 * JOBS });
    assert.equal(found.items.length, JOBS);
    // Reconciles after the first (a poll a second, the jobs' backlog) asked nothing again: one Event.
    const all = (await workerPoolEvents(k, "default", name)).filter((x) => x.reason === "RecordsOn");
    assert.equal(all.length, 1);
  });
});
