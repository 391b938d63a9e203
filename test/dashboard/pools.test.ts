// The Pools page against a real operator run: a real control plane (kube-apiserver + etcd from
// ~/.cache/conveyor), the WorkerPool CRD, `conveyor operator` scaling a pool from its Redis
// backlog, and `conveyor api` reading WorkerPools and their Events through the kubeconfig —
// the page shows the scale decision with its reason. (docs/screenshots/pools.png comes from
// `make demo SCREENSHOTS=1`: test/e2e/screenshots.ts.)
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, contractHash, Producer, type RedisClient } from "../../queue/index.ts";
import { ControlPlane, findAssets } from "../support/controlplane.ts";
import { buildDashboard, CHROMIUM, launchBrowser, startApi, type ApiProcess } from "../support/dashboard.ts";
import { startOperator, type OperatorProcess } from "../support/operator.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { REPO } from "../support/workers.ts";

function assetsMissing(): string | false {
  if (!existsSync(CHROMIUM)) return `${CHROMIUM} is not installed (scripts/system-deps.sh)`;
  try {
    findAssets();
    return false;
  } catch (err) {
    return `no test control plane (make controlplane): ${(err as Error).message.split("\n")[0]}`;
  }
}

describe(
  "dashboard Pools page on a real operator run",
  { skip: assetsMissing(), timeout: 15 * 60_000 },
  () => {
    let cp: ControlPlane;
    let redisServer: RedisServer;
    let redis: RedisClient;
    let operator: OperatorProcess;
    let api: ApiProcess;
    let browser: Awaited<ReturnType<typeof launchBrowser>>;
    const TOKEN = "pools-test-token-16b";

    before(async () => {
      buildDashboard();
      cp = await ControlPlane.start({ aggregation: false });
      await cp.kubectl("apply", "--server-side", "-f", join(REPO, "crds", "conveyor.dev_workerpools.yaml"));
      await cp.waitForCrd("workerpools.conveyor.dev");
      redisServer = await RedisServer.start();
      redis = connectRedis(redisServer.url);
      operator = await startOperator(cp, "op-dash", ["--metrics-api=false"]);
      api = await startApi(cp.dir, "api-pools", {
        REDIS_URL: redisServer.url,
        CONVEYOR_API_TOKEN: TOKEN,
        KUBECONFIG: cp.kubeconfigPath,
      });
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      if (api) await stopProcess(api, 2000);
      if (operator) await stopProcess(operator.proc, 5000);
      redis?.disconnect();
      await redisServer?.stop();
      await cp?.stop();
    });

    test("a scale decision from the operator appears with its reason; the oldest waiting job's age beside the wait target; the published contract's hash", async () => {
      const contract = { data: { type: "object", required: ["i"] } };
      await cp.run("kubectl", [`--kubeconfig=${cp.kubeconfigPath}`, "apply", "-f", "-"], {
        input: JSON.stringify({
          apiVersion: "conveyor.dev/v1alpha1",
          kind: "WorkerPool",
          metadata: { name: "thumbs", namespace: "default" },
          spec: {
            queue: "media/thumbs",
            redis: { url: redisServer.url },
            handler: { module: "/app/handler.js" },
            scaling: {
              mode: "direct",
              minReplicas: 0,
              // (one replica: its axis spans 0..1.5, where uPlot's own ticks are 0.5 apart)
              maxReplicas: 1,
              targetBacklogPerReplica: 10,
              targetWaitSeconds: 30,
            },
            contract,
          },
        }),
      });
      const producer = new Producer(redis);
      for (let i = 0; i < 30; i++) await producer.enqueue("media/thumbs", { i });

      const page = await browser.context.newPage();
      page.setDefaultTimeout(60_000);
      await page.goto(api.base);
      await page.getByLabel("API token").fill(TOKEN);
      await page.keyboard.press("Enter");
      await page.getByRole("link", { name: "Pools" }).click();
      await page.locator('tr[data-pool="thumbs"]').waitFor();
      await page.getByRole("link", { name: "default/thumbs" }).click();
      // The page refreshes every 10 s; the operator activates the pool within its poll interval.
      const decision = page.locator(".decisions tbody tr").filter({ hasText: "0 → " });
      await decision.first().waitFor({ timeout: 180_000 });
      const text = (await decision.first().textContent()) ?? "";
      assert.match(text, /backlog 30|backlog \d+/);
      // Latency mode's reasoning, with its numbers (no worker has reported a duration: no pods run here).
      assert.match(
        text,
        /wait target 30s: no job durations measured yet \(\d+ waiting, oldest waited [\d.]+s\)/,
      );
      // Nothing runs the jobs (no node): the oldest keeps waiting, and its age shows against the target.
      const oldest = page.locator("dd[data-oldest]");
      await oldest.filter({ hasText: /^\d+ s/ }).waitFor();
      assert.match((await oldest.textContent()) ?? "", /^\d+ s\s*\/ target 30 s$/);
      // spec.contract, as the operator published it
      const published = page.locator("dd[data-contract]");
      await published.waitFor();
      assert.equal((await published.textContent())?.trim(), contractHash(contract));
      assert.match((await published.getAttribute("title")) ?? "", /^inline, published /);
      // Replicas have their own axis on the right: beside a backlog of hundreds, a few pods on the
      // backlog's axis drew as a flat line at zero.
      await page.locator('.chart[data-axes="3"] .u-axis').nth(2).waitFor();
      // The backlog as the samples it has (dots: a line between two samples a minute apart drew
      // a ramp that never happened); the replicas hold between decisions (steps).
      await page
        .locator('.chart[data-series="backlog:left:points,desired replicas:right:stepped"]')
        .waitFor();
      // Both axes count things: ticks on whole numbers (the demo's screenshot read "7.5 replicas").
      for (const side of ["left", "right"]) {
        const drawn = (await page.locator(".chart").getAttribute(`data-ticks-${side}`)) ?? "";
        assert.ok(
          drawn !== "" && drawn.split(",").every((v) => Number.isInteger(Number(v))),
          `${side} ticks ${drawn}`,
        );
      }
      const points = Number(await page.locator(".chart").getAttribute("data-points"));
      // Each read of the page (every 10 s) adds a sample.
      await waitFor(
        "another sample on the chart",
        async () => Number(await page.locator(".chart").getAttribute("data-points")) > points,
        30_000,
      );
    });
  },
);
