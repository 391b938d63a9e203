// The dashboard's flow view in a real headless Chromium against `conveyor api`, Redis, PostgreSQL
// and workers: a diamond flow (a → b, c → d) opened from a job's page while it runs, its nodes
// changing state live (no reload) as the test lets each job finish, the counts by state; and a
// flow of 1,000 jobs (1 → 998 → 1) grouped by stage, its crowded stage summed up in one node.
// Writes docs/screenshots/flow.png and flow-wide.png.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { Producer } from "../../queue/index.ts";
import { buildDashboard, CHROMIUM, DashboardStack, launchBrowser } from "../support/dashboard.ts";
import { REPO } from "../support/workers.ts";

const P = "dia";
const [A, B, D] = [`${P}/a`, `${P}/b`, `${P}/d`];
const SHOTS = join(REPO, "docs/screenshots");

describe(
  "dashboard: a flow",
  { skip: !existsSync(CHROMIUM) && `${CHROMIUM} is not installed (scripts/system-deps.sh)` },
  () => {
    let s: DashboardStack;
    let browser: Awaited<ReturnType<typeof launchBrowser>>;
    let page: Page;
    let flowId = "";
    let ids: Record<string, string> = {};
    const gate = (name: string) => join(s.dir, `release-${name}`);
    const node = (key: string) => page.locator(`g.flow-node[data-key="${key}"]`);
    const stateOf = (key: string, state: string) =>
      page.locator(`g.flow-node[data-key="${key}"][data-state="${state}"]`).waitFor();
    const counts = async () =>
      Object.fromEntries(
        await page
          .locator("[data-count]")
          .evaluateAll((els) =>
            els.map((e) => [e.getAttribute("data-count"), Number(e.querySelector("b")!.textContent)]),
          ),
      );

    before(async () => {
      buildDashboard();
      mkdirSync(SHOTS, { recursive: true });
      s = await DashboardStack.start({ queues: [A, B, D] });
      ({ flowId, ids } = await new Producer(s.redis).enqueueFlow(P, [
        { key: "a", queue: A, data: { untilFile: gate("a") } },
        { key: "b", queue: B, data: { untilFile: gate("b") }, parents: ["a"] },
        { key: "c", queue: B, data: { untilFile: gate("c") }, parents: ["a"], onParentFailure: "continue" },
        { key: "d", queue: D, data: { untilFile: gate("d") }, parents: ["b", "c"] },
      ]));
      browser = await launchBrowser();
      page = await browser.context.newPage();
      page.setDefaultTimeout(30_000);
      await page.goto(s.api.base);
      await page.getByLabel("API token").fill(s.token);
      await page.keyboard.press("Enter");
      await page.locator(".live.on").waitFor();
    });
    after(async () => {
      await browser?.close();
      await s?.stop();
    });

    test("a job's page links to its flow; the graph has a column per stage and edges to the parents", async () => {
      await page.goto(`${s.api.base}/#/job/${ids.b}`);
      const link = page.locator('[data-field="flow"] a');
      await link.waitFor();
      assert.match(await page.locator('[data-field="flow"]').innerText(), new RegExp(`${flowId}\\s+as b`));
      await link.click();
      await stateOf("a", "active");
      assert.equal(new URL(page.url()).hash, `#/flow/${flowId}`);
      const stages = await page
        .locator("[data-stage]")
        .evaluateAll((els) => els.map((e) => e.getAttribute("data-stage")));
      assert.deepEqual(stages, [A, B, D], "stages in the order the flow reaches them");
      for (const k of ["b", "c", "d"])
        assert.equal(await node(k).getAttribute("data-state"), "waiting-children");
      assert.match((await node("d").textContent()) ?? "", /2 to go/);
      assert.equal(await page.locator("path.flow-edge").count(), 4, "a→b, a→c, b→d, c→d");
      assert.deepEqual(await counts(), { active: 1, "waiting-children": 3 });
    });

    test("states change live as the jobs run; the counts follow", async () => {
      writeFileSync(gate("a"), "");
      await stateOf("a", "completed");
      await stateOf("b", "active");
      await stateOf("c", "active");
      writeFileSync(gate("b"), "");
      await stateOf("b", "completed");
      await page.locator('g.flow-node[data-key="d"]', { hasText: "1 to go" }).waitFor();
      assert.deepEqual(await counts(), { active: 1, completed: 2, "waiting-children": 1 });
      assert.match(
        await page.locator(`[data-stage="${B}"] [data-stage-counts]`).innerText(),
        /1 active, 1 completed/,
      );
      await page.screenshot({ path: join(SHOTS, "flow.png"), fullPage: false });
      writeFileSync(gate("c"), "");
      await stateOf("d", "active");
      writeFileSync(gate("d"), "");
      await stateOf("d", "completed");
      await page.locator('[data-count="completed"] b', { hasText: /^4$/ }).waitFor();
      assert.deepEqual(await counts(), { completed: 4 });
    });

    test("the search's flow:<id> lists the flow's recorded jobs and links to its graph", async () => {
      await s.recorded("flow_id = $1 AND flow_key = 'd' AND state = 'completed'", [flowId]);
      await page.goto(`${s.api.base}/#/search?q=${encodeURIComponent(`flow:${flowId}`)}`);
      await page.locator(`tr[data-job="${ids.d}"]`).waitFor();
      const rows = await page
        .locator("tbody tr")
        .evaluateAll((els) => els.map((e) => e.getAttribute("data-job")));
      assert.deepEqual(
        rows,
        ["a", "b", "c", "d"].map((k) => ids[k]),
      );
      await page.locator("[data-flow-link] a").click();
      await stateOf("d", "completed");
      assert.equal(new URL(page.url()).hash, `#/flow/${flowId}`);
    });

    test("a flow of 1,000 jobs stays readable: a stage shows 50 nodes, the rest as one summary", async () => {
      // (no worker serves this pipeline: the root waits ready, the others for their parents)
      const wide = await new Producer(s.redis).enqueueFlow("wide", [
        { key: "split", queue: "wide/split", data: {} },
        ...Array.from({ length: 998 }, (_, i) => ({
          key: `page-${String(i).padStart(3, "0")}`,
          queue: "wide/page",
          data: {},
          parents: ["split"],
        })),
        {
          key: "join",
          queue: "wide/join",
          data: {},
          parents: Array.from({ length: 998 }, (_, i) => `page-${String(i).padStart(3, "0")}`),
        },
      ]);
      await page.goto(`${s.api.base}/#/flow/${wide.flowId}`);
      await page.locator('[data-more="wide/page"]').waitFor();
      assert.equal(await page.locator('[data-field="jobs"]').innerText(), "1,000");
      assert.deepEqual(await counts(), { ready: 1, "waiting-children": 999 });
      assert.equal(await page.locator("g.flow-node[data-key^='page-']").count(), 49);
      assert.match((await page.locator('[data-more="wide/page"]').textContent()) ?? "", /\+949 more/);
      assert.match(
        await page.locator('[data-stage="wide/page"] [data-stage-counts]').innerText(),
        /998 waiting-children/,
      );
      assert.ok((await page.locator("path.flow-edge").count()) <= 100, "edges to the summary are one each");
      await page.screenshot({ path: join(SHOTS, "flow-wide.png"), fullPage: false });
    });
  },
);
