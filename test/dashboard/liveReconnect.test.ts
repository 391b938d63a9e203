// The dashboard's live view in a real headless Chromium across `conveyor api` restarts: after a
// restart with the same token the page is live again by itself (the session survives and the
// event stream reopens); after a restart with a new token the page goes back to sign-in.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { connectRedis, Producer, type RedisClient } from "../../queue/index.ts";
import { buildDashboard, CHROMIUM, launchBrowser, startApi, type ApiProcess } from "../support/dashboard.ts";
import { stopProcess } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";

const TOKEN = "reconnect-test-token-01";
const LATER = { delayMs: 3_600_000 }; // no worker: the job stays delayed

describe(
  "live view across API restarts",
  { skip: !existsSync(CHROMIUM) && `${CHROMIUM} is not installed (scripts/system-deps.sh)` },
  () => {
    let server: RedisServer;
    let redis: RedisClient;
    let api: ApiProcess;
    let port: number;
    let dir: string;
    let browser: Awaited<ReturnType<typeof launchBrowser>>;
    let page: Page;
    const restart = async (token: string) => {
      await stopProcess(api, 2000);
      await page.locator(".live.off").waitFor();
      api = await startApi(
        dir,
        `api-${token}`,
        { REDIS_URL: server.url, CONVEYOR_API_TOKEN: token },
        [],
        port,
      );
    };

    before(async () => {
      buildDashboard();
      server = await RedisServer.start();
      redis = connectRedis(server.url);
      dir = mkdtempSync(join(tmpdir(), "cvy-reconnect-"));
      api = await startApi(dir, "api", { REDIS_URL: server.url, CONVEYOR_API_TOKEN: TOKEN });
      port = Number(new URL(api.base).port);
      browser = await launchBrowser();
      page = await browser.context.newPage();
      page.setDefaultTimeout(30_000);
    });
    after(async () => {
      await browser?.close();
      if (api) await stopProcess(api, 2000);
      redis?.disconnect();
      await server?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test("after a restart with the same token the page is live again and shows new queues", async () => {
      await page.goto(api.base);
      await page.getByLabel("API token").fill(TOKEN);
      await page.keyboard.press("Enter");
      await page.locator(".live.on").waitFor();
      await new Producer(redis).enqueue("shop/before", {}, { id: "before-1", ...LATER });
      await page.locator('tr[data-queue="shop/before"]').waitFor();
      await restart(TOKEN);
      await page.locator(".live.on").waitFor();
      // Pushed over the reopened stream (a `queues` event): no reload, no fallback refresh.
      await new Producer(redis).enqueue("shop/after", {}, { id: "after-1", ...LATER });
      await page.locator('tr[data-queue="shop/after"]').waitFor();
    });

    test("after a restart with a new token the page goes back to sign-in", async () => {
      await restart(`${TOKEN}-rotated`);
      await page.getByLabel("API token").waitFor();
    });
  },
);
