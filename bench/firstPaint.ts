// First paint of the dashboard's queues page in headless Debian Chromium (issue 14: ≤ 1 s on
// this machine): first-contentful-paint and the time until the queue table shows its rows,
// both from the navigation's start, cold (a fresh --user-data-dir: empty HTTP cache) and warm
// (the same profile loading the page again: hashed assets from the cache, index.html
// revalidated). Part of the dashboard bench (bench/dashboard.ts), against its data set.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CHROMIUM, launchBrowser } from "../test/support/dashboard.ts";
import { percentile, REPO, round } from "./lib/util.ts";

export interface PaintSample {
  /** first-contentful-paint, ms after the navigation started. */
  fcpMs: number;
  /** The first frame after the queue table's first row entered the DOM. */
  rowsMs: number;
}

export interface PaintFigures {
  /** Loads per mode. */
  n: number;
  queues: number;
  cold: { fcpMs: number; rowsMs: number; rowsMaxMs: number };
  warm: { fcpMs: number; rowsMs: number; rowsMaxMs: number };
  /** Compressed bytes the cold load transferred (index.html, JS, CSS: what the budget counts). */
  coldBytes: number;
}

// Installed before the page's own scripts: notes when the first queue row is in the DOM, then
// the frame after it (a requestAnimationFrame callback runs before that frame paints; the
// timeout after it runs once it has).
const WATCH_ROWS = `
window.__rowsAt = null;
new MutationObserver((_, obs) => {
  if (!document.querySelector("table.queues tbody tr")) return;
  obs.disconnect();
  requestAnimationFrame(() => setTimeout(() => { window.__rowsAt = performance.now(); }));
}).observe(document, { childList: true, subtree: true });`;

/** The UI as the API serves it, built from the sources (the API finds dist/dashboard). */
export function buildDashboard(): void {
  execFileSync(
    join(REPO, "node_modules/.bin/vite"),
    ["build", "--config", "dashboard/vite.config.ts", "--logLevel", "warn"],
    { cwd: REPO, stdio: "inherit" },
  );
}

async function signedInPage(base: string, token: string) {
  const browser = await launchBrowser();
  const res = await browser.context.request.post(`${base}/auth/session`, {
    data: { token },
    headers: { origin: base },
  });
  if (!res.ok()) throw new Error(`sign-in: HTTP ${res.status()}`);
  const page = await browser.context.newPage();
  await page.addInitScript(WATCH_ROWS);
  return { browser, page };
}

async function load(
  page: Awaited<ReturnType<typeof signedInPage>>["page"],
  url: string,
): Promise<PaintSample> {
  await page.goto(url, { waitUntil: "commit" });
  // Functions, not strings: the page's CSP forbids eval (the root tsconfig has no DOM types,
  // hence globalThis).
  const rowsAt = () => (globalThis as unknown as { __rowsAt: number | null }).__rowsAt;
  await page.waitForFunction(rowsAt, undefined, { timeout: 60_000 });
  const fcpMs = await page.evaluate(
    () => performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? NaN,
  );
  return { fcpMs, rowsMs: (await page.evaluate(rowsAt))! };
}

const median = (xs: number[]) => round(percentile(xs, 50), 0);

/**
 * `samples` cold loads (each in a fresh profile, signed in through the API first so the page is
 * the queues page, not the sign-in form) and, in the last profile, `samples` warm loads.
 */
export async function measureFirstPaint(
  base: string,
  token: string,
  samples = 5,
): Promise<PaintFigures | { skipped: string }> {
  if (!existsSync(CHROMIUM)) return { skipped: `${CHROMIUM} is not installed (scripts/system-deps.sh)` };
  const url = `${base}/#/`;
  const cold: PaintSample[] = [];
  const warm: PaintSample[] = [];
  let coldBytes = 0;
  let queues = 0;
  for (let i = 0; i < samples; i++) {
    const { browser, page } = await signedInPage(base, token);
    try {
      let bytes = 0;
      const count = (r: { url(): string; headerValue(n: string): Promise<string | null> }) =>
        r.url().startsWith(base) && !/\/(queues|events|auth)/.test(new URL(r.url()).pathname)
          ? r.headerValue("content-length").then((v) => (bytes += Number(v ?? 0)))
          : undefined;
      const counting = (r: Parameters<typeof count>[0]) => void count(r);
      page.on("response", counting);
      cold.push(await load(page, url));
      page.off("response", counting);
      coldBytes = bytes;
      queues = await page.locator("table.queues tbody tr").count();
      if (i === samples - 1)
        for (let k = 0; k < samples; k++) {
          await page.goto("about:blank");
          warm.push(await load(page, url));
        }
    } finally {
      await browser.close();
    }
  }
  const figures = (xs: PaintSample[]) => ({
    fcpMs: median(xs.map((x) => x.fcpMs)),
    rowsMs: median(xs.map((x) => x.rowsMs)),
    rowsMaxMs: round(Math.max(...xs.map((x) => x.rowsMs)), 0),
  });
  return { n: samples, queues, cold: figures(cold), warm: figures(warm), coldBytes };
}
