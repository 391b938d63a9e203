// The dashboard's group views in a real headless Chromium against `conveyor api` and Redis: a
// queue's groups with the most waiting jobs (among 1,000 groups), running / limit, rate, paused
// and the next job's wait; search by group name; a group's jobs in the order they will run; pause
// (confirmed, by keyboard) and resume of one group, as Redis then says. Writes
// docs/screenshots/groups.png.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import {
  connectRedis,
  Consumer,
  listGroups,
  Producer,
  setGroupLimit,
  type RedisClient,
} from "../../queue/index.ts";
import { buildDashboard, CHROMIUM, launchBrowser, startApi, type ApiProcess } from "../support/dashboard.ts";
import { stopProcess } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { REPO } from "../support/workers.ts";

const TOKEN = "groups-test-token-0001";
const Q = "shop/orders";
const SHOTS = join(REPO, "docs/screenshots");

describe(
  "dashboard: groups",
  { skip: !existsSync(CHROMIUM) && `${CHROMIUM} is not installed (scripts/system-deps.sh)` },
  () => {
    let server: RedisServer;
    let redis: RedisClient;
    let api: ApiProcess;
    let dir: string;
    let browser: Awaited<ReturnType<typeof launchBrowser>>;
    let page: Page;
    const row = (g: string) => page.locator(`tr[data-group="${g}"]`);

    before(async () => {
      buildDashboard();
      mkdirSync(SHOTS, { recursive: true });
      server = await RedisServer.start();
      redis = connectRedis(server.url);
      await setGroupLimit(redis, Q, undefined, { concurrency: 2 });
      await setGroupLimit(redis, Q, "acme", { concurrency: 5, rate: { max: 10, perMs: 1000 } });
      const producer = new Producer(redis);
      // bigco 300, acme 40, then 1,000 tenants with one job each
      await producer.enqueueMany(
        Q,
        Array.from({ length: 300 }, (_, i) => ({ id: `bigco-${i}`, data: { i }, group: "bigco" })),
      );
      await producer.enqueueMany(
        Q,
        Array.from({ length: 40 }, (_, i) => ({ id: `acme-${i}`, data: { i }, group: "acme" })),
      );
      await producer.enqueueMany(
        Q,
        Array.from({ length: 1000 }, (_, i) => ({ id: `t-${i}`, data: { i }, group: `tenant-${i}` })),
      );
      // Round-robin: one job of each of the first groups in turn starts (bigco-0, acme-0, …).
      const running = await new Consumer(redis, Q, { workerId: "w1", leaseMs: 600_000 }).claim(4);
      assert.deepEqual(
        running.jobs.map((j) => j.id),
        ["bigco-0", "acme-0", "t-0", "t-1"],
      );
      dir = mkdtempSync(join(tmpdir(), "cvy-groups-dash-"));
      api = await startApi(dir, "api", { REDIS_URL: server.url, CONVEYOR_API_TOKEN: TOKEN });
      browser = await launchBrowser();
      page = await browser.context.newPage();
      page.setDefaultTimeout(30_000);
      await page.goto(api.base);
      await page.getByLabel("API token").fill(TOKEN);
      await page.keyboard.press("Enter");
      await page.locator(".live.on").waitFor();
    });
    after(async () => {
      await browser?.close();
      if (api) await stopProcess(api, 2000);
      redis?.disconnect();
      await server?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test("the groups with the most waiting jobs, with running / limit, rate, state and the next job's wait", async () => {
      await page.goto(`${api.base}/#/queue/${encodeURIComponent(Q)}`);
      await row("bigco").waitFor();
      const card = page.locator('[data-card="groups"]');
      assert.match(
        await card.innerText(),
        /1,336 jobs waiting in 1,000 group\(s\); every group: concurrency 2/,
      );
      // most waiting first: bigco (299), acme (39), then tenants with one job
      const names = await card.locator('table[aria-label="groups"] tbody tr th').allInnerTexts();
      assert.equal(names.length, 20, "the top 20, not 1,000 rows");
      assert.deepEqual(names.slice(0, 2), ["bigco", "acme"]);
      const cells = async (g: string) => (await row(g).locator("td").allInnerTexts()).map((t) => t.trim());
      const bigco = await cells("bigco");
      assert.deepEqual(bigco.slice(0, 3), ["299", "1 / 2", "—"]);
      assert.match(bigco[3]!, /ago$/);
      assert.equal(bigco[4], "—", "not paused");
      const acme = await cells("acme");
      assert.deepEqual(acme.slice(0, 3), ["39", "1 / 5 (own)", "10/s"]);
    });

    test("a group's jobs: the next waiting ones in the order they will run, then the running one", async () => {
      await row("bigco").locator("a").click();
      const view = page.locator('[data-group-jobs="bigco"]');
      await view.waitFor();
      // (the heading gains its counts with the jobs: both wait for the API's answer)
      await view.locator('tr[data-job="bigco-1"]').waitFor();
      assert.match(await view.locator("h3").innerText(), /Group bigco: 299 waiting, 1 running/);
      const ids = await view.locator("tbody tr th").allInnerTexts();
      assert.deepEqual(ids.slice(0, 3), ["bigco-1", "bigco-2", "bigco-3"]);
      assert.equal(ids.length, 51, "50 waiting + the running one");
      assert.equal(ids.at(-1), "bigco-0");
      assert.match(await view.locator('tr[data-job="bigco-0"]').innerText(), /running/);
      assert.match(page.url(), /group=bigco/);
    });

    test("pause a group by keyboard after a confirmation; Redis says so; resume", async () => {
      await page.locator('[data-group-jobs="bigco"]').getByRole("button", { name: "Close" }).click();
      await page.locator('[data-group-jobs="bigco"]').waitFor({ state: "detached" });
      await row("acme").getByRole("button", { name: "Pause acme" }).focus();
      await page.keyboard.press("Enter");
      const dialog = page.getByRole("dialog", { name: `Pause group acme of ${Q}?` });
      await dialog.waitFor();
      await page.keyboard.press("Enter"); // the confirm button has the focus
      await row("acme").getByRole("button", { name: "Resume acme" }).waitFor();
      assert.match(await row("acme").innerText(), /paused/);
      const acme = (await listGroups(redis, Q)).groups.find((g) => g.group === "acme");
      assert.equal(acme?.paused, true);
      await page.locator('[data-card="groups"]').screenshot({ path: join(SHOTS, "groups.png") });
      await row("acme").getByRole("button", { name: "Resume acme" }).click();
      await row("acme").getByRole("button", { name: "Pause acme" }).waitFor();
      assert.equal((await listGroups(redis, Q)).groups.find((g) => g.group === "acme")?.paused, false);
    });

    test("search by group: the exact name first, then the names it starts", async () => {
      await page.getByLabel("Find group").fill("tenant-99");
      await page.getByRole("button", { name: "Find" }).click();
      await row("tenant-990").waitFor();
      const names = await page.locator('table[aria-label="groups"] tbody tr th').allInnerTexts();
      assert.equal(names[0], "tenant-99");
      assert.deepEqual(
        names.slice(1).sort(),
        Array.from({ length: 10 }, (_, i) => `tenant-99${i}`),
      );
      await page.getByLabel("Find group").fill("nobody");
      await page.getByRole("button", { name: "Find" }).click();
      // the exact name is always looked up: a group without jobs shows with zeros
      await row("nobody").waitFor();
      assert.match(await row("nobody").innerText(), /0\s+0 \/ 2/);
    });
  },
);
