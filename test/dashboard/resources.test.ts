// The Resources page in a real browser over two `conveyor api` replicas on one real Redis: a
// resource of three keys where jobs with `uses` used two keys to the ceiling and the third is
// benched, so jobs wait for budget. Both replicas sample into Redis and answer the same last
// hour; the page, reached and read with the keyboard, shows each key's use of each limit, the
// benched key and until when, the jobs waiting for budget and the chart of the samples.
// docs/screenshots/resources.png comes from this test.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { pollUntil } from "../support/poll.ts";
import {
  sidelineResourceKey,
  connectRedis,
  Consumer,
  parseLimits,
  Producer,
  setResource,
  type RedisClient,
} from "../../queue/index.ts";
import { buildDashboard, CHROMIUM, launchBrowser, startApi, type ApiProcess } from "../support/dashboard.ts";
import { stopProcess } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { REPO } from "../support/workers.ts";

const TOKEN = "resources-test-token";
const QUEUE = "llm/summarize";

interface ResourceReply {
  resources: {
    name: string;
    waiting: number;
    keys: { id: string; benchedUntil: number | null; limits: { unit: string; used: number }[] }[];
    history: { at: number; keys: Record<string, Record<string, number>> }[];
  }[];
}

describe(
  "dashboard Resources page",
  {
    skip: !existsSync(CHROMIUM) && `${CHROMIUM} is not installed (scripts/system-deps.sh)`,
    timeout: 10 * 60_000,
  },
  () => {
    let dir: string;
    let redisServer: RedisServer;
    let redis: RedisClient;
    let apis: ApiProcess[] = [];
    let browser: Awaited<ReturnType<typeof launchBrowser>>;

    const read = async (api: ApiProcess): Promise<ResourceReply> => {
      const res = await fetch(`${api.base}/resources`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(res.status, 200);
      return (await res.json()) as ResourceReply;
    };

    before(async () => {
      buildDashboard();
      dir = mkdtempSync(join(tmpdir(), "cvy-res-"));
      redisServer = await RedisServer.start();
      redis = connectRedis(redisServer.url);
      const env = {
        REDIS_URL: redisServer.url,
        CONVEYOR_API_TOKEN: TOKEN,
        CONVEYOR_API_RESOURCE_SAMPLE: "500ms",
      };
      apis = [await startApi(dir, "api-a", env), await startApi(dir, "api-b", env)];
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      for (const a of apis) await stopProcess(a, 2000);
      redis?.disconnect();
      await redisServer?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test("each key's use per limit, the benched key, jobs waiting for budget and the last hour, from either replica", async () => {
      await setResource(
        redis,
        QUEUE,
        "openai",
        ["k1", "k2", "k3"].map((id) => ({ id, limits: parseLimits("requests=60/m,tokens=200000/m") })),
      );
      await sidelineResourceKey(redis, QUEUE, "openai", "k3", Date.now() + 10 * 60_000);
      // 120 jobs of 1,000 tokens: k1 and k2 admit floor(0.9 × 60) = 54 each, k3 is benched, 12 wait.
      const producer = new Producer(redis);
      await producer.enqueueMany(
        QUEUE,
        Array.from({ length: 120 }, (_, i) => ({ data: { doc: i }, uses: { openai: { tokens: 1000 } } })),
      );
      const worker = new Consumer(redis, QUEUE, { workerId: "w1", leaseMs: 600_000 });
      let claimed = 0;
      // In rounds, so the samples show the use growing.
      for (let round = 0; round < 4; round++) {
        claimed += (await worker.claim(27)).jobs.length;
        const at = Date.now();
        await pollUntil("a sample after this round", async () => {
          const [r] = (await read(apis[round % 2]!)).resources;
          return (r?.history.at(-1)?.at ?? 0) > at - 500 && (r?.history.length ?? 0) >= round + 1;
        });
      }
      claimed += (await worker.claim(50)).jobs.length;
      assert.equal(claimed, 108);
      const [a, b] = await pollUntil("both replicas show the final state and the same history", async () => {
        const [ra, rb] = [(await read(apis[0]!)).resources[0]!, (await read(apis[1]!)).resources[0]!];
        const done = (r: typeof ra) => r.waiting === 12 && r.history.at(-1)?.keys.k1?.requests === 0.9;
        return done(ra) && done(rb) ? [ra, rb] : undefined;
      });
      assert.deepEqual(
        a!.history.map((s) => s.at),
        b!.history.map((s) => s.at),
        "one history in Redis, whichever replica answers",
      );
      assert.ok(a!.history.length >= 4);
      assert.deepEqual(
        a!.keys.map((k) => [
          k.id,
          k.limits.find((l) => l.unit === "requests")!.used,
          k.benchedUntil !== null,
        ]),
        [
          ["k1", 54, false],
          ["k2", 54, false],
          ["k3", 0, true],
        ],
      );

      const page = await browser.context.newPage();
      page.setDefaultTimeout(60_000);
      await page.goto(apis[1]!.base);
      await page.getByLabel("API token").fill(TOKEN);
      await page.keyboard.press("Enter");
      // By keyboard: the header's Resources link, then Enter.
      const link = page.getByRole("link", { name: "Resources" });
      await link.waitFor();
      await link.focus();
      await page.keyboard.press("Enter");
      const card = page.locator('section.resource[data-resource="llm/openai"]');
      await card.getByRole("heading", { name: /openai/ }).waitFor();
      assert.equal(await card.locator("[data-waiting]").textContent(), "12");
      const k1 = card.locator('tr[data-key="k1"]');
      assert.match(
        (await k1.locator('td[data-limit="requests"]').textContent()) ?? "",
        /90 %.*54 \/ 60 per m/,
      );
      assert.match(
        (await k1.locator('td[data-limit="tokens"]').textContent()) ?? "",
        /27 %.*54,?000 \/ 200,?000 per m/,
      );
      assert.equal(await card.getByRole("meter", { name: "k1 requests: 54 of 60 per m" }).count(), 1);
      const k3 = card.locator('tr[data-key="k3"]');
      assert.match((await k3.getAttribute("class")) ?? "", /warn/);
      assert.notEqual((await k3.locator("td").nth(2).textContent())?.trim(), "—", "benched until a time");
      await card.getByRole("link", { name: QUEUE }).waitFor();
      const chart = card.locator(".chart");
      await chart.locator("canvas").waitFor();
      assert.ok(Number(await chart.getAttribute("data-points")) >= 4);
      mkdirSync(join(REPO, "docs/screenshots"), { recursive: true });
      await page.screenshot({ path: join(REPO, "docs/screenshots/resources.png"), fullPage: false });
    });
  },
);
