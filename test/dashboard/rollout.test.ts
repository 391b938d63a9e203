// The pool page's rollout card against a real rollout: a real control plane (ReplicaSet
// controller, scheduler, kwok node) with a `conveyor worker` per pod (test/support/podRunner.ts),
// `conveyor operator` running the canary, and `conveyor api` sampling both versions' counters.
// The page shows the step, the weights, both versions' figures over the step — checked number
// by number against the counters in Redis less the step's baseline in status — and a chart of
// both failure rates across the step boundary. With SCREENSHOTS=DIR it saves DIR/rollout.png.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { RESOURCES, resourcePath } from "../../operator/apis/coordinates.ts";
import type { WorkerPool } from "../../operator/apis/v1alpha1/types.ts";
import { KubeClient } from "../../operator/kube/client.ts";
import { figures } from "../../operator/rollout/judge.ts";
import {
  countersFromFields,
  countersSince,
  emptyCounters,
  Producer,
  QueueAdmin,
  readVersionCounters,
  type RedisClient,
} from "../../queue/index.ts";
import { ControlPlane, findAssets } from "../support/controlplane.ts";
import { buildDashboard, CHROMIUM, launchBrowser, startApi, type ApiProcess } from "../support/dashboard.ts";
import { startPoolHarness, type PoolHarness } from "../support/operator.ts";
import { pollUntil } from "../support/poll.ts";
import { stopProcess } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE, RECORDING_HANDLER } from "../support/workers.ts";

function assetsMissing(): string | false {
  if (!existsSync(CHROMIUM)) return `${CHROMIUM} is not installed (scripts/system-deps.sh)`;
  try {
    findAssets();
    return false;
  } catch (err) {
    return `no test control plane (make controlplane): ${(err as Error).message.split("\n")[0]}`;
  }
}

const LONG = 240_000;

describe("dashboard pool page: a canary rollout", { skip: assetsMissing(), timeout: 15 * 60_000 }, () => {
  let h: PoolHarness;
  let cp: ControlPlane;
  let k: KubeClient;
  let redisServer: RedisServer;
  let redis: RedisClient;
  let api: ApiProcess;
  let browser: Awaited<ReturnType<typeof launchBrowser>>;
  const TOKEN = "rollout-test-token-16b";

  before(async () => {
    buildDashboard();
    h = await startPoolHarness("op-rollout", {
      controlPlane: { controllers: true, scheduler: true, kwok: true, aggregation: false },
      pods: {},
    });
    ({ cp, k, redis: redisServer, r: redis } = h);
    api = await startApi(cp.dir, "api-rollout", {
      REDIS_URL: redisServer.url,
      CONVEYOR_API_TOKEN: TOKEN,
      KUBECONFIG: cp.kubeconfigPath,
      CONVEYOR_API_ROLLOUT_SAMPLE: "1s",
    });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    if (api) await stopProcess(api, 2000);
    await h?.stop();
  });

  const getPool = (name: string) =>
    k.get<WorkerPool>(resourcePath(RESOURCES.workerPools, { namespace: "default", name }));

  /** Two pods of 4 slots; FAIL_PERCENT of each version's attempts fail (retried: none dies). */
  const applyPool = (name: string, env: Record<string, string>) =>
    cp.apply(
      JSON.stringify({
        apiVersion: "conveyor.dev/v1alpha1",
        kind: "WorkerPool",
        metadata: { name, namespace: "default" },
        spec: {
          queue: `${name}/work`,
          redis: { url: redisServer.url },
          handler: { module: RECORDING_HANDLER.slice("module:".length) },
          concurrency: 4,
          maxJobSeconds: 60,
          drainSeconds: 5,
          replicas: 2,
          scaling: { pollSeconds: 1 },
          template: { env: Object.entries(env).map(([n, value]) => ({ name: n, value })) },
          rollout: {
            canary: {
              // the second step holds for an hour: the page is read while it is in progress
              steps: [
                { weight: 30, holdSeconds: 12 },
                { weight: 60, holdSeconds: 3600 },
              ],
              // loose: the canary fails more than the stable version but is not rolled back (with
              // 50 jobs the stable version's 15 % has failed at least once: 0.85^50 < 0.001)
              analysis: { minJobs: 50, maxFailureRate: 0.6, maxFailureRatio: 100, maxP95Ratio: 50 },
            },
          },
        },
      }),
      "--server-side",
      "--field-manager=tester",
      "--force-conflicts",
    );

  test("step, weights, both versions' figures over the step and their failure rates across the step boundary", async () => {
    const name = "summarize";
    const queue = `${name}/work`;
    await applyPool(name, { VERSION_TAG: "v1", FAIL_PERCENT: "15" });
    const v1 = await pollUntil(
      "2 stable pods running, the stable version recorded",
      async () => {
        const hash = (await getPool(name))?.status?.rollout?.stableHash;
        return h.runner!.running.filter((p) => p.name.startsWith(`${name}-`)).length >= 2 && hash;
      },
      { timeoutMs: LONG },
    );
    const producer = new Producer(redis);
    let n = 0;
    let feeding = true;
    const fed = (async () => {
      while (feeding) {
        await producer.enqueueMany(
          queue,
          Array.from({ length: 8 }, () => ({ id: `j-${n++}`, data: { sleepMs: 20 }, attempts: 6 })),
        );
        await new Promise((res) => setTimeout(res, 250));
      }
    })();
    await applyPool(name, { VERSION_TAG: "v2", FAIL_PERCENT: "25" });
    // In the second step for 10 s: samples on both sides of the boundary.
    const inStep2 = await pollUntil(
      "the rollout 10 s into its second step",
      async () => {
        const ro = (await getPool(name))?.status?.rollout;
        // (before the rollout starts, status.rollout names the first version Promoted)
        return ro?.phase === "RolledBack" ||
          (ro?.phase === "Promoted" && ro.stableHash !== v1) ||
          (ro?.step === 1 && Date.now() - Date.parse(ro.stepStartedAt ?? "") > 10_000)
          ? ro
          : undefined;
      },
      { timeoutMs: LONG, intervalMs: 500 },
    );
    assert.equal(inStep2.phase, "Progressing", inStep2.message);
    feeding = false;
    await fed;
    // Everything ended: the counters hold still while the page is compared with them.
    const admin = new QueueAdmin(redis);
    await pollUntil(
      `${n} jobs finished`,
      async () => {
        const c = await admin.counts(queue);
        return c.completed + c.dead === n && c.inflight === 0 && c.ready === 0 && c.delayed === 0;
      },
      { timeoutMs: LONG, intervalMs: 250 },
    );

    const ro = (await getPool(name))!.status!.rollout!;
    assert.equal(ro.phase, "Progressing");
    const now = await readVersionCounters(redis, queue);
    const want = {
      stable: figures(
        countersSince(now.get(ro.stableHash!) ?? emptyCounters(), countersFromFields(ro.baseline?.stable)),
      ),
      canary: figures(
        countersSince(now.get(ro.canaryHash!) ?? emptyCounters(), countersFromFields(ro.baseline?.canary)),
      ),
    };
    assert.ok(want.stable.attempts > 0 && want.canary.attempts > 0, JSON.stringify(want));
    assert.ok(want.canary.failed > 0, "the canary failed some attempts in the step");

    const page = await browser.context.newPage();
    page.setDefaultTimeout(60_000);
    await page.setViewportSize({ width: 1100, height: 900 });
    await page.goto(api.base);
    await page.getByLabel("API token").fill(TOKEN);
    await page.keyboard.press("Enter");
    await page.getByRole("link", { name: "Pools" }).click();
    // The Pools list's rollout column: the step and the canary's weight as status has them,
    // linking to the pool page's rollout card.
    const cell = page.locator(`tr[data-pool="${name}"] td[data-rollout]`);
    await cell.waitFor();
    assert.equal(await cell.getAttribute("data-rollout"), "Progressing");
    assert.equal((await cell.textContent())?.trim(), `step ${ro.step! + 1}/2 · canary ${ro.weight}%`);
    assert.equal(ro.weight, 60);
    await cell.getByRole("link").click();
    assert.match(page.url(), new RegExp(`#/pool/default/${name}\\?card=rollout$`));
    const card = page.locator('.card.rollout[data-phase="Progressing"]');
    await card.waitFor();
    assert.ok(await card.isVisible(), "the link lands on the rollout card");
    const box = await card.boundingBox();
    assert.ok(box && box.y < 900, `the rollout card scrolled into view (top at ${box?.y})`);
    assert.equal((await card.locator("dd[data-step]").textContent())?.trim(), "2 / 2");
    assert.equal((await card.locator("dd[data-weights]").textContent())?.trim(), "30% → 60% → 100%");
    assert.equal((await card.locator("dd[data-weights] strong").textContent())?.trim(), "60%");
    for (const v of ["stable", "canary"] as const) {
      const f = want[v];
      const cells = (await card.locator(`tr[data-version="${v}"] td`).allTextContents()).map((c) => c.trim());
      assert.deepEqual(
        cells,
        [
          (v === "stable" ? ro.stableHash! : ro.canaryHash!).slice(0, 12),
          String(f.attempts),
          String(f.failed),
          `${(f.failureRate * 100).toFixed(1)}%`,
          f.p95Ms !== undefined ? `${f.p95Ms} ms` : "—",
        ],
        v,
      );
    }
    // The chart: both versions' rates and the canary's weight, rising from 30 to 60 at the boundary.
    const chart = card.locator('.chart[data-series^="stable failure %"]');
    await chart.waitFor();
    const detail = (await (
      await fetch(`${api.base}/pools/default/${name}`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).json()) as { rollout: { sampleSeconds: number; history: { weight: number }[] } };
    assert.equal(detail.rollout.sampleSeconds, 1);
    const weights = detail.rollout.history.map((s) => s.weight);
    assert.ok(weights.includes(30) && weights.includes(60), `sampled weights ${weights.join(",")}`);
    assert.ok(Number(await chart.getAttribute("data-points")) >= 10);
    assert.match((await card.textContent()) ?? "", /in the 1 s before it/);
    if (process.env.SCREENSHOTS)
      await card.screenshot({ path: join(process.env.SCREENSHOTS, "rollout.png") });

    // Promoted now: the column says so once status does.
    const promote = spawnSync(
      NODE,
      [CONVEYOR, "rollout", "promote", name, `--kubeconfig=${cp.kubeconfigPath}`],
      {
        encoding: "utf8",
        timeout: 60_000,
      },
    );
    assert.equal(promote.status, 0, promote.stderr);
    await pollUntil(
      "the rollout promoted",
      async () => (await getPool(name))?.status?.rollout?.phase === "Promoted",
      {
        timeoutMs: LONG,
      },
    );
    await page.goto(`${api.base}/#/pools`);
    const done = page.locator(`tr[data-pool="${name}"] td[data-rollout="Promoted"]`);
    await done.waitFor();
    assert.equal((await done.textContent())?.trim(), "promoted");
  });
});
