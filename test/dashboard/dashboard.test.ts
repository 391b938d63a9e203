// The dashboard in a real headless Chromium (Debian's, through playwright-core) against real
// Redis, PostgreSQL, worker and API processes: sign in, a queue appearing live with its first
// job, search by id / idempotency key / payload field (the job page shows the key), a job's
// progress moving, retrying a dead job and cancelling a running one from the UI, the handler's
// log lines, deleting a selection from a queue page, and the read-only mode. Screenshots of
// the views the demo does not show go to docs/screenshots/ (committed), so they stay true.
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { Consumer, Producer, QueueAdmin, QueueKeys } from "../../queue/index.ts";
import { buildDashboard, CHROMIUM, DashboardStack, launchBrowser } from "../support/dashboard.ts";
import { waitFor } from "../support/processes.ts";
import { REPO } from "../support/workers.ts";
import { DEMO_SCREENSHOTS } from "../e2e/screenshots.ts";

const Q = "media/thumbs";
const SHOTS = join(REPO, "docs/screenshots");
const cancelAvailable =
  typeof (QueueAdmin.prototype as unknown as { cancel?: unknown }).cancel === "function";

describe(
  "dashboard in a browser",
  { skip: !existsSync(CHROMIUM) && `${CHROMIUM} is not installed (scripts/system-deps.sh)` },
  () => {
    let s: DashboardStack;
    let producer: Producer;
    let browser: Awaited<ReturnType<typeof launchBrowser>>;
    let page: Page;
    // queues, queue and job come from `make demo SCREENSHOTS=1` (real pools, real numbers:
    // test/e2e/screenshots.ts); this test writes the views the demo does not show
    const shot = async (name: string) => {
      if (!(DEMO_SCREENSHOTS as readonly string[]).includes(name))
        await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
    };
    const jobsRecorded = (where: string, params: unknown[]) => s.recorded(where, params);

    before(async () => {
      buildDashboard();
      mkdirSync(SHOTS, { recursive: true });
      s = await DashboardStack.start({ queues: [Q] });
      producer = new Producer(s.redis);
      browser = await launchBrowser();
      page = await browser.context.newPage();
      page.setDefaultTimeout(30_000);
    });
    after(async () => {
      await browser?.close();
      await s?.stop();
    });

    test("sign in with the API token, then a queue appears live when its first job is enqueued", async () => {
      await page.goto(s.api.base);
      await page.getByLabel("API token").waitFor();
      await shot("signin");
      await page.getByLabel("API token").fill("wrong");
      await page.keyboard.press("Enter");
      await page.getByRole("alert").filter({ hasText: "wrong token" }).waitFor();
      await page.getByLabel("API token").fill(s.token);
      await page.keyboard.press("Enter");
      await page.getByText("No queues yet").waitFor();
      await page.locator(".live.on").waitFor();
      const cookies = await browser.context.cookies(s.api.base);
      const session = cookies.find((c) => c.name === "conveyor_session")!;
      assert.equal(session.httpOnly, true);
      assert.equal(session.sameSite, "Strict");

      await producer.enqueue(
        Q,
        { size: "large", file: "cat.png" },
        { id: "thumb-1", idempotencyKey: "upload-cat" },
      );
      // Pushed over SSE: the page's fallback refresh is 30 s away.
      const row = page.locator(`tr[data-queue="${Q}"]`);
      await row.waitFor({ timeout: 20_000 });
      await waitFor(
        "thumb-1 completed on the page",
        async () => (await row.locator('[data-count="completed"]').textContent()) === "1",
        20_000,
      );
      await jobsRecorded("id = $1 AND state = 'completed'", ["thumb-1"]);
      await producer.enqueue(Q, { size: "small", file: "dog.png" }, { id: "thumb-2" });
      await producer.enqueue(
        Q,
        { size: "small", file: "fox.png", sleepMs: 300 },
        { id: "thumb-3", delayMs: 600_000 },
      );
      await waitFor(
        "two completed",
        async () => (await row.locator('[data-count="completed"]').textContent()) === "2",
        20_000,
      );
      await shot("queues");
      // The last minute's count stays beside its sparkline, even in a narrower window.
      await page.setViewportSize({ width: 1000, height: 900 });
      try {
        const rate = row.locator("td.rate");
        await rate.locator("span.small").waitFor();
        const [spark, label] = await Promise.all([
          rate.locator("svg.spark").boundingBox(),
          rate.locator("span.small").boundingBox(),
        ]);
        assert.ok(spark && label);
        assert.ok(
          label.x >= spark.x + spark.width - 1,
          `label at x ${label.x}, sparkline ends at ${spark.x + spark.width}`,
        );
        assert.ok(
          label.y < spark.y + spark.height && label.y + label.height > spark.y,
          "label beside the line, not under it",
        );
      } finally {
        await page.setViewportSize({ width: 1400, height: 900 });
      }
    });

    test("search by job id, by idempotency key and by a payload field (keyboard: / focuses the box)", async () => {
      await jobsRecorded("id = $1 AND state = 'completed'", ["thumb-2"]);
      const search = async (q: string) => {
        await page.evaluate("document.activeElement && document.activeElement.blur()");
        await page.keyboard.press("/");
        const box = page.getByRole("searchbox", { name: "Search jobs" });
        assert.equal(
          await page.evaluate("document.activeElement.getAttribute('aria-label')"),
          "Search jobs",
          "/ focuses the search box",
        );
        await box.fill(q);
        await page.keyboard.press("Enter");
        await page.getByRole("heading", { name: "Search" }).waitFor();
        const results = page.locator(`section[data-q="${q}"]`);
        await results.locator("tr[data-job], .empty").first().waitFor();
        return results
          .locator("tr[data-job]")
          .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-job")));
      };
      assert.deepEqual(await search("thumb-1"), ["thumb-1"]);
      assert.deepEqual(await search("upload-cat"), ["thumb-1"]);
      const bySize = await search("data:size=small");
      assert.deepEqual(bySize.sort(), ["thumb-2", "thumb-3"]);
      await page.locator('tr[data-job="thumb-2"]').waitFor();
      await shot("search");
      // The key's hit opens the job, whose page shows the key.
      assert.deepEqual(await search("upload-cat"), ["thumb-1"]);
      await page.locator('section[data-q="upload-cat"] tr[data-job="thumb-1"] a').first().click();
      await page.locator('[data-field="idempotencyKey"]').getByText("upload-cat").waitFor();
    });

    test("open a job and watch its progress move as the handler reports it", async () => {
      await page.goto(`${s.api.base}/#/queue/${encodeURIComponent(Q)}?state=delayed`);
      await page.locator('tr[data-job="thumb-3"]').waitFor();
      await page.locator(".chart .uplot").waitFor(); // uPlot loads with the first chart
      await shot("queue");
      await producer.enqueue(
        Q,
        { progressSteps: 8, stepMs: 700, logLines: 2, result: { pages: 8 } },
        { id: "thumb-progress", idempotencyKey: "report-2026-11" },
      );
      await page.goto(`${s.api.base}/#/job/thumb-progress?queue=${encodeURIComponent(Q)}`);
      const bar = page.locator('[data-field="progress"] [role="progressbar"]');
      const value = async () => Number((await bar.getAttribute("aria-valuenow").catch(() => null)) ?? -1);
      const first = await waitFor("progress shown", async () => {
        const v = await value();
        return v > 0 && v < 100 ? v : null;
      });
      await waitFor("progress moved", async () => (await value()) > first, 30_000);
      await page.locator('[data-field="idempotencyKey"]').getByText("report-2026-11").waitFor();
      await shot("job");
      await page.locator('[data-field="state"]').getByText("completed").waitFor({ timeout: 30_000 });
      // Finished: its last report is not shown as if it still ran.
      await waitFor("no progress bar once completed", async () => (await bar.count()) === 0);
      assert.equal(await page.locator('[data-field="progress"]').textContent(), "—");
      // The handler's ctx.log lines, on the job page.
      await page.locator("pre.logs").getByText("line 2 of attempt 1").waitFor();
    });

    test("a job that failed once and then succeeded shows 2 attempts and its result; a queue no worker served warns", async () => {
      await producer.enqueue(Q, { failTimes: 1, result: { pages: 2 } }, { id: "thumb-flaky", attempts: 3 });
      await page.goto(`${s.api.base}/#/job/thumb-flaky?queue=${encodeURIComponent(Q)}`);
      await page.locator('[data-field="state"]').getByText("completed").waitFor({ timeout: 30_000 });
      await page.locator('[data-field="attempts"]').getByText("2 of 3").waitFor();
      await page.getByRole("heading", { name: "Result", exact: true }).waitFor();
      assert.equal(await page.getByRole("heading", { name: "Error", exact: true }).count(), 0);
      // (the failure stays in the stage's failed attempts)
      await page
        .locator('[data-section="previous-errors"] tr[data-attempt="1"][data-kind="exception"]')
        .getByText("planned failure 1")
        .waitFor();

      const typo = "media/thumbz";
      await producer.enqueue(typo, { n: 1 });
      await page.goto(`${s.api.base}/#/queue/${encodeURIComponent(typo)}`);
      await page
        .locator('[data-warning="not-served"]')
        .getByText("No worker has claimed from this queue")
        .waitFor();
      await page.goto(`${s.api.base}/#/queue/${encodeURIComponent(Q)}`);
      await page.locator('tr[data-job="thumb-flaky"]').waitFor();
      assert.equal(await page.locator('[data-warning="not-served"]').count(), 0);
    });

    test("a job's task, its invalid result's failing paths and the rejected result", async () => {
      const typed = "media/typed";
      await producer.enqueue(typed, { text: "…" }, { id: "typed-1", attempts: 3 });
      await s.redis.hset(new QueueKeys(typed).job("typed-1"), "task", "extract");
      const c = new Consumer(s.redis, typed, { workerId: "t", leaseMs: 10_000 });
      const [job] = (await c.claim(1)).jobs;
      await c.fail(
        job!,
        { name: "ContractViolationError", message: "result breaks the contract: /name required" },
        {
          retryable: true,
          retryDelayMs: 600_000,
          kind: "invalid-result",
          details: [{ pointer: "/name", rule: "required", message: "must have required property 'name'" }],
          rejected: '{"nom":"Acme"}',
        },
      );
      await page.goto(`${s.api.base}/#/job/typed-1?queue=${encodeURIComponent(typed)}`);
      await page.locator('[data-field="task"]').getByText("extract").waitFor();
      const row = page.locator('[data-section="previous-errors"] tr[data-kind="invalid-result"]');
      await row.getByText("result breaks the contract: /name required").waitFor();
      await row.locator('code[data-pointer="/name"]').waitFor();
      await page.locator('[data-section="previous-errors"]').getByText('"nom": "Acme"').waitFor();
    });

    test("the queue's chart spans the minutes that had jobs (or 15 m / 1 h / 6 h), rates and durations on axes of their own", async () => {
      await page.goto(`${s.api.base}/#/queue/${encodeURIComponent(Q)}`);
      const chart = page.locator(".card[data-range] .chart");
      const spans = page.getByRole("tablist", { name: "chart span" });
      await chart.locator(".uplot").waitFor();
      // Jobs finished only in the last minute or two: not an hour of zeros before them.
      const points = Number(await chart.getAttribute("data-points"));
      assert.ok(points >= 3 && points <= 6, `the active span: ${points} points`);
      assert.equal(
        await chart.getAttribute("data-series"),
        "completed/min:left:stepped,failed/min:left:stepped,p50:right:stepped,p95:right:stepped",
      );
      // Three axes: time, jobs/min on the left, durations on the right.
      assert.equal(await chart.getAttribute("data-axes"), "3");
      assert.equal(await chart.locator(".u-axis").count(), 3);
      // Pointing at the latest minute that had jobs: its p95 written as a duration (ms beside
      // jobs/min drew as one dot at ~7,000). The minute under way may have none yet, when a minute
      // began since the last job: from the right edge leftwards, a point at a time.
      const over = (await chart.locator(".u-over").boundingBox())!;
      await waitFor("the legend reads the latest minute with jobs", async () => {
        for (let i = 0; i < points; i++) {
          const x = over.x + over.width - 1 - (i * (over.width - 2)) / Math.max(1, points - 1);
          await page.mouse.move(x, over.y + over.height / 2);
          const legend = (await chart.locator(".u-legend").innerText()).replace(/\n/g, " ");
          if (/p95\s*:?\s*\d+(\.\d+)? (ms|s)/.test(legend)) return true;
        }
        return false;
      });
      // (a point per minute, and the minute under way held until now)
      for (const [tab, minutes] of [
        ["6 h", 360],
        ["15 m", 15],
        ["1 h", 60],
      ] as const) {
        await spans.getByRole("tab", { name: tab, exact: true }).click();
        await page
          .locator(
            `.card[data-range] .chart:is([data-points="${minutes}"], [data-points="${minutes + 1}"]) .uplot`,
          )
          .waitFor();
        await page.getByRole("heading", { name: `Last ${tab}` }).waitFor();
      }
      await spans.getByRole("tab", { name: "active" }).click();
      await page.getByRole("heading", { name: /^Since \d\d:\d\d$/ }).waitFor();
    });

    test("retry a dead job from the UI", async () => {
      await producer.enqueue(Q, { final: true }, { id: "thumb-dead", attempts: 1 });
      await waitFor(
        "thumb-dead is dead",
        async () => (await new QueueAdmin(s.redis).job("thumb-dead"))?.state === "dead",
      );
      await page.goto(`${s.api.base}/#/job/thumb-dead?queue=${encodeURIComponent(Q)}`);
      await page.locator('[data-field="state"]').getByText("dead").waitFor();
      await page.getByRole("button", { name: "Retry" }).click();
      await page.getByText("Retried").waitFor();
      // It ran again (and, its input still bad, died again): a second execution is recorded.
      const executions = page
        .locator(".card", { has: page.getByRole("heading", { name: "Executions" }) })
        .locator("tbody tr");
      await waitFor("a second execution", async () => {
        await page.reload();
        await page.locator('[data-field="state"]').waitFor();
        return (await executions.count()) === 2;
      });
    });

    test("cancel a running job from the UI", async () => {
      await producer.enqueue(Q, { sleepMs: 60_000 }, { id: "thumb-long" });
      await waitFor(
        "thumb-long runs",
        async () => (await new QueueAdmin(s.redis).job("thumb-long"))?.state === "active",
      );
      await page.goto(`${s.api.base}/#/job/thumb-long?queue=${encodeURIComponent(Q)}`);
      await page.getByRole("button", { name: "Cancel" }).click();
      await page.getByText("Cancelled.").waitFor();
      await page.locator('[data-field="state"]').getByText("cancelled").waitFor({ timeout: 30_000 });
    });

    test("delete a selection from the queue page, keyboard only, after a confirmation", async () => {
      for (const id of ["thumb-del-1", "thumb-del-2", "thumb-keep"])
        await producer.enqueue(Q, { file: `${id}.png` }, { id, delayMs: 3_600_000 });
      await page.goto(`${s.api.base}/#/queue/${encodeURIComponent(Q)}?state=delayed`);
      await page.locator('tr[data-job="thumb-keep"]').waitFor();
      for (const id of ["thumb-del-1", "thumb-del-2"]) {
        await page.getByLabel(`select ${id}`).focus();
        await page.keyboard.press("Space");
      }
      await page.getByText("2 selected").waitFor();
      await page.getByRole("button", { name: "Delete selected" }).focus();
      await page.keyboard.press("Enter");
      const dialog = page.getByRole("dialog", { name: `Delete 2 jobs of ${Q}?` });
      await dialog.waitFor();
      await shot("delete");
      await page.keyboard.press("Enter"); // the dialog's focused button: Delete
      await page.getByText("2 deleted").waitFor();
      await page.locator('tr[data-job="thumb-del-1"]').waitFor({ state: "detached" });
      assert.equal(await page.locator('tr[data-job="thumb-del-2"]').count(), 0);
      await page.locator('tr[data-job="thumb-keep"]').waitFor();
      const admin = new QueueAdmin(s.redis);
      assert.equal(await admin.job("thumb-del-1", Q), null);
      assert.equal((await admin.job("thumb-keep", Q))?.state, "delayed");
      // The records keep them, marked deleted: the "deleted" tab lists them.
      await jobsRecorded("id = $1 AND state = 'deleted'", ["thumb-del-2"]);
      await jobsRecorded("id = $1 AND state = 'deleted'", ["thumb-del-1"]);
      await page.getByRole("tab", { name: "deleted" }).click();
      await page.locator('tr[data-job="thumb-del-1"]').waitFor();
      await page.locator('tr[data-job="thumb-del-2"]').waitFor();
      assert.equal(await page.getByRole("checkbox").count(), 0, "nothing to act on in the deleted tab");
    });

    test("read-only: the same UI without actions, and the API refuses them (403)", async () => {
      const ro = await s.startApi("api-ro", ["--read-only"]);
      const p = await browser.context.newPage();
      // Same host, same token: the session cookie from the first test is valid here too.
      await p.goto(ro.base);
      await p.locator(`tr[data-queue="${Q}"]`).waitFor();
      await p.getByText("read-only").first().waitFor();
      assert.equal(await p.getByRole("button", { name: /Retry dead|Purge dead|Pause/ }).count(), 0);
      await p.goto(`${ro.base}/#/job/thumb-1?queue=${encodeURIComponent(Q)}`);
      await p.locator('[data-field="state"]').getByText("completed").waitFor();
      assert.equal(await p.getByRole("button", { name: /Retry|Cancel|Run now/ }).count(), 0);
      await p.goto(`${ro.base}/#/queue/${encodeURIComponent(Q)}?state=delayed`);
      await p.locator('tr[data-job="thumb-keep"]').waitFor();
      assert.equal(await p.getByRole("checkbox").count(), 0, "no selection, so no bulk actions");
      const status = await p.evaluate(async (queue) => {
        const r = await fetch(`/queues/${encodeURIComponent(queue)}/dead/retry`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}",
        });
        return r.status;
      }, Q);
      assert.equal(status, 403);
      page = p;
      await p.goto(`${ro.base}/#/`);
      await p.locator(`tr[data-queue="${Q}"]`).waitFor();
      await shot("readonly");
    });
  },
);
