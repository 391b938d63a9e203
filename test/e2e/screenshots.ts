// The dashboard's screenshots in README.md and docs/dashboard.md, taken from `make demo
// SCREENSHOTS=1` while it runs: real pools scaling, real stages, real numbers. Headless Debian
// Chromium (playwright-core, a fresh profile) through the demo's `kubectl port-forward`.
import { join } from "node:path";
import { launchBrowser } from "../support/dashboard.ts";
import { waitFor } from "../support/processes.ts";
import { REPO } from "../support/workers.ts";
import type { Dashboard } from "./nodeScenario.ts";
import { POOLS } from "./scenario.ts";

/** The screenshots this writes (test/dashboard writes the others). */
export const DEMO_SCREENSHOTS = ["queues", "pools", "queue", "job"] as const;

/**
 * The browser opened and signed in before the burst (a cold Chromium start takes longer than a
 * short run lasts on a loaded machine); the returned step takes the shots mid-run and closes it.
 */
export async function openScreenshots(
  d: Dashboard,
  say: (line: string) => void,
): Promise<{ take: () => Promise<void>; close: () => Promise<void> }> {
  const dir = join(REPO, "docs", "screenshots");
  const browser = await launchBrowser();
  try {
    const page = await browser.context.newPage();
    page.setDefaultTimeout(60_000);
    await page.goto(d.url);
    await page.getByLabel("API token").fill(d.token);
    await page.keyboard.press("Enter");
    await page.locator(".live.on").waitFor();
    const shot = async (name: (typeof DEMO_SCREENSHOTS)[number]) => {
      await page.screenshot({ path: join(dir, `${name}.png`), fullPage: false });
      say(`  screenshot docs/screenshots/${name}.png`);
    };
    const take = async () => {
      try {
        await page.goto(`${d.url}/#/`);
        for (const p of POOLS) await page.locator(`tr[data-queue="${p.queue}"]`).waitFor();
        await page.locator(".live.on").waitFor();
        await shot("queues");

        const last = POOLS[POOLS.length - 1]!;
        await page.getByRole("link", { name: "Pools" }).click();
        await page.locator(`tr[data-pool="${last.name}"]`).waitFor();
        await page.getByRole("link", { name: `default/${last.name}` }).click();
        await page.locator(".decisions tbody tr").filter({ hasText: "0 → " }).first().waitFor();
        // the pool past its first scale-up with a few pods serving, when the run gets there within
        // 30 s (the page refreshes itself); the picture as it is otherwise
        // (polled from here: the dashboard's CSP refuses the string a waitForFunction would evaluate)
        await waitFor(
          "the pool past its first scale-up",
          async () =>
            (await page.locator(".decisions tbody tr").count()) >= 2 &&
            (await page.locator("td").filter({ hasText: "ready" }).count()) >= 3,
          30_000,
          500,
        ).catch(() => say("  (the pool had not scaled past one pod within 30 s: pictured as it was)"));
        await shot("pools");

        await page.goto(`${d.url}/#/queue/${encodeURIComponent(last.queue)}`);
        await page.locator(".chart .uplot").first().waitFor();
        await shot("queue");

        await page.goto(`${d.url}/#/job/doc-0?queue=${encodeURIComponent(POOLS[0].queue)}`);
        await page.locator('[data-field="state"]').getByText("completed").waitFor();
        await shot("job");
      } finally {
        await browser.close();
      }
    };
    return { take, close: () => browser.close() };
  } catch (err) {
    await browser.close();
    throw err;
  }
}
