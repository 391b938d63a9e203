// The dashboard under real traffic, as a new user tries it (issue 27): a two-stage pipeline,
// hundreds of jobs carrying a `tenant` field enqueued over more than a minute, 2 % of them
// failing for good, PostgreSQL records on, real workers, API and headless Chromium. What
// broke there: the "Last hour" chart's window, "Jobs/min" on the queues page, progress shown
// on finished jobs, search by the first stage's payload, the timeline after the stream was trimmed.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { eventsOfEntries, Producer, QueueKeys } from "../../queue/index.ts";
import { buildDashboard, CHROMIUM, DashboardStack, launchBrowser } from "../support/dashboard.ts";
import { waitFor } from "../support/processes.ts";

const A = "shop/a";
const B = "shop/b";
const TENANTS = 7;
const JOBS = 360;
const MINUTE = 60_000;
/** Every 50th job (from the 8th on) fails for good in the first stage: 2 %. */
const fails = (i: number) => i % 50 === 7;

describe(
  "dashboard under real traffic (two stages, hundreds of jobs over more than a minute)",
  { skip: !existsSync(CHROMIUM) && `${CHROMIUM} is not installed (scripts/system-deps.sh)` },
  () => {
    let s: DashboardStack;
    let browser: Awaited<ReturnType<typeof launchBrowser>>;
    let page: Page;
    const get = async <T>(path: string): Promise<T> => {
      const res = await fetch(`${s.api.base}${path}`, { headers: { authorization: `Bearer ${s.token}` } });
      assert.equal(res.status, 200, `${path}: ${res.status}`);
      return (await res.json()) as T;
    };
    const finished = async () =>
      (
        await s.pg.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM conveyor_jobs WHERE state IN ('completed', 'dead')",
        )
      )[0]!.n;

    before(async () => {
      buildDashboard();
      s = await DashboardStack.start({ queues: [A, B], next: { [A]: B } });
      const producer = new Producer(s.redis);
      // Due over 65 s (delayed jobs, promoted by the workers as they come due): the records then
      // hold more than a minute of traffic, and the test waits for it to finish, not for a time.
      await producer.enqueueMany(
        A,
        Array.from({ length: JOBS }, (_, i) => {
          const data = { tenant: `t${i % TENANTS}`, n: i, progressSteps: 2, stepMs: 5 };
          return {
            id: `order-${i}`,
            attempts: 1,
            delayMs: Math.round((i * 65_000) / JOBS),
            data: fails(i) ? { ...data, final: true } : data,
          };
        }),
      );
      await waitFor(
        `${JOBS} jobs recorded as finished`,
        async () => (await finished()) >= JOBS,
        180_000,
        500,
      );
      browser = await launchBrowser();
      page = await browser.context.newPage();
      page.setDefaultTimeout(30_000);
      await page.goto(s.api.base);
      await page.getByLabel("API token").fill(s.token);
      await page.keyboard.press("Enter");
      await page.locator(`tr[data-queue="${B}"]`).waitFor();
    });
    after(async () => {
      await browser?.close();
      await s?.stop();
    });

    test("the queue page's chart spans the minutes that had jobs; its 1 h tab the last hour, zero-filled", async () => {
      const stats = await get<{ minutes: { minute: number; completed: number }[] }>(
        `/queues/${encodeURIComponent(B)}/stats`,
      );
      const busy = stats.minutes.filter((m) => m.completed > 0).map((m) => m.minute);
      assert.ok(busy.length >= 2, "the traffic spans at least two minutes");
      await page.goto(`${s.api.base}/#/queue/${encodeURIComponent(B)}`);
      const chart = page.locator(".card[data-range] .chart");
      await chart.locator(".uplot").waitFor();
      const attr = async (name: string) => Number(await chart.getAttribute(name));
      // The active span: from before the first busy minute to now, not an hour of zeros.
      assert.ok((await attr("data-from")) <= Math.min(...busy), "the first busy minute is drawn");
      assert.ok((await attr("data-points")) < 60, "fewer points than the hour");
      // The 1 h tab: sixty minutes, zero-filled, ending with the minute under way (held until now).
      await page
        .getByRole("tablist", { name: "chart span" })
        .getByRole("tab", { name: "1 h", exact: true })
        .click();
      await page
        .locator('.card[data-range] .chart:is([data-points="60"], [data-points="61"]) .uplot')
        .waitFor();
      const [from, to] = [await attr("data-from"), await attr("data-to")];
      assert.ok(
        to - from >= 59 * MINUTE && to - from <= 60 * MINUTE,
        `the hour: ${(to - from) / MINUTE} min`,
      );
      assert.ok(Date.now() - to <= MINUTE, "the window ends now");
    });

    test('"Jobs/min" on the queues page shows the jobs of the last minute', async () => {
      await page.goto(`${s.api.base}/#/`);
      const rate = page.locator(`tr[data-queue="${B}"] td.rate`);
      const shown = await waitFor(
        "a rate on the queues page",
        async () => Number((await rate.getAttribute("data-rate")) || 0),
        30_000,
      );
      assert.ok(shown > 0);
      await rate.locator("svg.spark").waitFor();
      assert.equal((await rate.locator("span").textContent())?.trim(), shown.toLocaleString("en"));
    });

    test("completed and dead jobs do not show their last progress report as if running", async () => {
      const dead = `order-7`;
      for (const [id, queue, state] of [
        [dead, A, "dead"],
        ["order-1", B, "completed"],
      ] as const) {
        await page.goto(`${s.api.base}/#/job/${id}?queue=${encodeURIComponent(queue)}`);
        await page.locator('[data-field="state"]').getByText(state).waitFor();
        assert.equal(await page.locator('[data-field="progress"]').textContent(), "—", id);
        assert.equal(await page.locator('[data-field="progress"] [role="progressbar"]').count(), 0);
      }
      // The queue page's list of dead jobs too (from Redis).
      const list = await get<{ items: { id: string; progress: number | null }[] }>(
        `/queues/${encodeURIComponent(A)}/jobs?state=dead&limit=200`,
      );
      assert.ok(list.items.some((j) => j.id === dead));
      assert.ok(list.items.every((j) => j.progress === null));
    });

    test("search tenant=t3 finds every t3 job, also those that moved on, and the job page shows each stage", async () => {
      const expected = Array.from({ length: JOBS }, (_, i) => i)
        .filter((i) => i % TENANTS === 3)
        .map((i) => `order-${i}`)
        .sort();
      const found = await get<{ items: { id: string; queue: string }[]; next: string | null }>(
        `/search?q=${encodeURIComponent("tenant=t3")}&limit=200`,
      );
      assert.equal(found.next, null);
      assert.deepEqual(found.items.map((h) => h.id).sort(), expected);
      assert.ok(found.items.filter((h) => h.queue === B).length > expected.length / 2, "most moved on");

      await page.goto(`${s.api.base}/#/search?q=${encodeURIComponent("tenant=t3")}`);
      const rows = page.locator('section[data-q="tenant=t3"] tr[data-job]');
      await rows.first().waitFor();
      assert.equal(await rows.count(), Math.min(50, expected.length), "a full first page");
      await page.goto(`${s.api.base}/#/job/order-3?queue=${encodeURIComponent(B)}`);
      const stages = page.locator('[data-section="stages"]');
      await stages.waitFor();
      assert.match((await stages.locator(`[data-stage="${A}"]`).textContent()) ?? "", /"tenant": "t3"/);
      assert.match((await stages.locator(`[data-stage="${B}"]`).textContent()) ?? "", /"ok": "order-3"/);
    });

    test("a timeline whose stream entries were trimmed is filled from the records", async () => {
      // Later traffic on stage B: 12,000 more jobs (due in an hour) push B's event stream past
      // its cap (10,000 entries), which trims order-1's entries away.
      await new Producer(s.redis).enqueueMany(
        B,
        Array.from({ length: 12_000 }, (_, i) => ({ id: `later-${i}`, data: { n: i }, delayMs: 3_600_000 })),
      );
      const kept = eventsOfEntries(await s.redis.xrange(new QueueKeys(B).events, "-", "+"), B);
      assert.ok(kept.length > 0);
      assert.ok(
        kept.every((e) => e.id !== "order-1"),
        "the stream no longer holds order-1's entries",
      );
      await page.goto(`${s.api.base}/#/job/order-1?queue=${encodeURIComponent(B)}`);
      await page.locator('[data-note="trimmed"]').waitFor();
      const entries = page.locator(".timeline li");
      assert.deepEqual(
        await entries.evaluateAll((li) => li.map((e) => `${e.dataset.event}/${e.dataset.source}`)),
        ["enqueued/records", "started/records", "completed/records", "started/records", "completed/records"],
      );
    });
  },
);
