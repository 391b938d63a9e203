// A job's completion notifications (docs/notifications.md) in GET /jobs/{id}/detail and on the
// dashboard's job page: a real worker sends them to a real receiver on port 0, `conveyor api`
// reads the deliveries the worker keeps, headless Chromium shows them.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Ajv2020 } from "ajv/dist/2020.js";
import type { Page } from "playwright-core";
import { openApiDocument } from "../../api/openapi.ts";
import { connectRedis, Producer, type RedisClient } from "../../queue/index.ts";
import { buildDashboard, CHROMIUM, launchBrowser, startApi, type ApiProcess } from "../support/dashboard.ts";
import { stopProcess, waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { RECORDING_HANDLER, startWorker, type WorkerProcess } from "../support/workers.ts";

const TOKEN = "notify-views-token-01";
const QUEUE = "hooks/send";

describe(
  "notification deliveries in the job API and on the job page",
  { skip: !existsSync(CHROMIUM) && `${CHROMIUM} is not installed (scripts/system-deps.sh)` },
  () => {
    let server: RedisServer;
    let redis: RedisClient;
    let receiver: Server;
    let hook: string;
    let dir: string;
    let api: ApiProcess;
    let worker: WorkerProcess;
    let browser: Awaited<ReturnType<typeof launchBrowser>>;
    let page: Page;

    const detail = async (id: string) => {
      const res = await fetch(`${api.base}/jobs/${id}/detail?queue=${encodeURIComponent(QUEUE)}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(res.status, 200, `detail of ${id}`);
      return (await res.json()) as { notifications: Record<string, unknown>[] } & Record<string, unknown>;
    };

    before(async () => {
      buildDashboard();
      dir = mkdtempSync(join(tmpdir(), "cvy-notifyviews-"));
      writeFileSync(join(dir, "secret"), "whsec_views_0123456789abcdef\n");
      // 200 "ok" on /hook; 500 on /broken, so that delivery is retried until it is given up.
      receiver = createServer((req, res) => {
        req.resume();
        req.on("end", () =>
          req.url === "/hook"
            ? res.writeHead(200, { "content-type": "text/plain" }).end("ok")
            : res.writeHead(500, { "content-type": "text/plain" }).end("receiver broken"),
        );
      });
      await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
      hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
      server = await RedisServer.start();
      redis = connectRedis(server.url);
      worker = await startWorker({
        dir,
        name: "w-hooks",
        env: {
          REDIS_URL: server.url,
          CONVEYOR_QUEUE: QUEUE,
          CONVEYOR_HANDLER: RECORDING_HANDLER,
          CONVEYOR_NOTIFY_URL: `${hook}/hook`,
          CONVEYOR_NOTIFY_EVENTS: "completed",
          CONVEYOR_NOTIFY_ALLOW: "127.0.0.1/32",
          CONVEYOR_NOTIFY_SECRET_FILE: join(dir, "secret"),
          CONVEYOR_NOTIFY_TIMEOUT: "2s",
          CONVEYOR_NOTIFY_RETRY_BASE: "100ms",
          CONVEYOR_NOTIFY_RETRY_MAX: "1s",
        },
      });
      api = await startApi(dir, "api", { REDIS_URL: server.url, CONVEYOR_API_TOKEN: TOKEN });
      browser = await launchBrowser();
      page = await browser.context.newPage();
      page.setDefaultTimeout(30_000);
    });
    after(async () => {
      await browser?.close();
      if (api) await stopProcess(api, 2000);
      if (worker) await stopProcess(worker, 3000);
      redis?.disconnect();
      await server?.stop();
      if (receiver) {
        receiver.closeAllConnections();
        await new Promise<void>((resolve) => receiver.close(() => resolve()));
      }
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test("GET /jobs/{id}/detail lists each delivery: delivered, failed after its retries, none for a job without", async () => {
      const producer = new Producer(redis);
      await producer.enqueue(QUEUE, { result: { ok: true } }, { id: "sent-1" });
      await producer.enqueue(
        QUEUE,
        {},
        { id: "both-1", notify: { url: `${hook}/broken`, events: ["completed"] } },
      );
      await producer.enqueue(QUEUE, {}, { id: "later-1", delayMs: 3_600_000 });

      await waitFor(
        "sent-1 delivered",
        async () => (await detail("sent-1")).notifications[0]?.state === "delivered",
      );
      const sent = await detail("sent-1");
      assert.equal(sent.notifications.length, 1);
      assert.deepEqual(
        { ...sent.notifications[0], firstAt: undefined, lastAt: undefined },
        {
          event: "completed",
          url: `${hook}/hook`,
          state: "delivered",
          attempts: 1,
          status: 200,
          answer: "ok",
          firstAt: undefined,
          lastAt: undefined,
          nextAt: null,
        },
      );

      // The pool's destination and the job's own: one delivery each.
      await waitFor(
        "both-1's own notification given up",
        async () =>
          (await detail("both-1")).notifications.find((n) => n.url === `${hook}/broken`)?.state === "failed",
        30_000,
      );
      const both = await detail("both-1");
      const byUrl = new Map(both.notifications.map((n) => [n.url, n]));
      assert.equal(byUrl.get(`${hook}/hook`)?.state, "delivered");
      const failed = byUrl.get(`${hook}/broken`)!;
      assert.equal(failed.status, 500);
      assert.equal(failed.answer, "receiver broken");
      assert.ok((failed.attempts as number) >= 2, `retried before giving up: ${failed.attempts} attempt(s)`);

      const later = await detail("later-1");
      assert.deepEqual(later.notifications, []);

      // Every reply as the OpenAPI document declares it.
      const ajv = new Ajv2020({ strict: false, allErrors: true });
      ajv.addFormat("date-time", (v: string) => !Number.isNaN(Date.parse(v)));
      ajv.addSchema(openApiDocument(), "openapi.json");
      const v = ajv.getSchema(
        "openapi.json#/paths/~1jobs~1{id}~1detail/get/responses/200/content/application~1json/schema",
      )!;
      assert.ok(v, "the document declares GET /jobs/{id}/detail");
      for (const body of [sent, both, later]) assert.ok(v(body), ajv.errorsText(v.errors));
    });

    test("the job page shows a Notifications section only for a job that has any", async () => {
      await page.goto(api.base);
      await page.getByLabel("API token").fill(TOKEN);
      await page.keyboard.press("Enter");
      await page.locator(".live.on").waitFor();

      await page.goto(`${api.base}/#/job/both-1?queue=${encodeURIComponent(QUEUE)}`);
      const section = page.locator('[data-section="notifications"]');
      await section.getByRole("heading", { name: "Notifications" }).waitFor();
      const delivered = section.locator('tr[data-state="delivered"]');
      const failed = section.locator('tr[data-state="failed"]');
      assert.match(
        await delivered.innerText(),
        new RegExp(`completed\\s+${hook}/hook\\s+delivered\\s+1\\b.*200 ok`, "s"),
      );
      assert.match(await failed.innerText(), /failed/);
      assert.match(await failed.innerText(), /500 receiver broken/);

      await page.goto(`${api.base}/#/job/later-1?queue=${encodeURIComponent(QUEUE)}`);
      await page.getByRole("heading", { name: "Executions" }).waitFor();
      assert.equal(await page.locator('[data-section="notifications"]').count(), 0);
      assert.equal(await page.getByRole("heading", { name: "Notifications" }).count(), 0);
    });
  },
);
