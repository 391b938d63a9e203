// The dashboard in a real headless Chromium signed in with named tokens (api/tokens.ts): a
// read-only token sees the queue with no action, an operate token pauses but has no purge or
// delete (admin), a token limited to group `acme` gets a page of acme's counts and jobs and
// nothing of `globex` (docs/screenshots/tenant.png), and a revoked token's page goes back to sign-in.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { hashToken, writeTokensFile, type Scope } from "../../api/tokens.ts";
import { pino } from "pino";
import { Consumer, Producer } from "../../queue/index.ts";
import { startRecorder, type JobRecorder } from "../../records/index.ts";
import { REPO } from "../support/workers.ts";
import {
  buildDashboard,
  CHROMIUM,
  DashboardStack,
  launchBrowser,
  type ApiProcess,
} from "../support/dashboard.ts";

const Q = "media/thumbs";
const READER = "reader-token-0123456789abcdef";
const OPERATOR = "operator-token-0123456789abcdef";
const ADMIN = "admin-token-0123456789abcdef";
const ACME = "acme-token-0123456789abcdef";
const SHOP = "shop/orders";
const scope = (verbs: Scope["verbs"]): Scope => ({ pipelines: ["media"], queues: null, groups: null, verbs });

describe(
  "dashboard with scoped tokens",
  { skip: !existsSync(CHROMIUM) && `${CHROMIUM} is not installed (scripts/system-deps.sh)` },
  () => {
    let s: DashboardStack;
    let api: ApiProcess;
    let browser: Awaited<ReturnType<typeof launchBrowser>>;
    let file: string;
    let recorder: JobRecorder | null = null;

    before(async () => {
      buildDashboard();
      s = await DashboardStack.start({ queues: [] });
      file = join(s.dir, "tokens.yaml");
      writeTokensFile(file, [
        { name: "reader", hash: hashToken(READER), scopes: scope(["read"]) },
        { name: "operator", hash: hashToken(OPERATOR), scopes: scope(["read", "operate"]) },
        { name: "admin", hash: hashToken(ADMIN), scopes: scope(["read", "operate", "admin"]) },
        {
          name: "acme",
          hash: hashToken(ACME),
          scopes: { pipelines: ["shop"], queues: null, groups: ["acme"], verbs: ["read"] },
        },
      ]);
      await new Producer(s.redis).enqueue(Q, { n: 1 }, { id: "t-1", delayMs: 3_600_000 });
      api = await s.startApi("api-tokens", ["--tokens-file", file]);
      browser = await launchBrowser();
    });
    after(async () => {
      await recorder?.stop();
      await browser?.close();
      await s?.stop();
    });

    const signIn = async (token: string) => {
      await browser.context.clearCookies();
      const p = await browser.context.newPage();
      p.setDefaultTimeout(30_000);
      await p.goto(api.base);
      await p.getByLabel("API token").fill(token);
      await p.keyboard.press("Enter");
      await p.locator(`tr[data-queue="${Q}"]`).waitFor();
      return p;
    };

    test("a read token: the queue, its job, and no control at all", async () => {
      const p = await signIn(READER);
      assert.equal(await p.getByRole("button", { name: /Retry dead|Purge dead|Pause/ }).count(), 0);
      assert.equal(await p.getByRole("link", { name: "Audit" }).count(), 0, "the audit trail is admin's");
      await p.goto(`${api.base}/#/job/t-1?queue=${encodeURIComponent(Q)}`);
      await p.locator('[data-field="state"]').waitFor();
      assert.equal(await p.getByRole("button", { name: /Retry|Cancel|Run now/ }).count(), 0);
      await p.goto(`${api.base}/#/queue/${encodeURIComponent(Q)}?state=delayed`);
      await p.locator('tr[data-job="t-1"]').waitFor();
      assert.equal(await p.getByRole("checkbox").count(), 0, "no selection, so no bulk actions");
      await p.close();
    });

    test("an operate token: pause and retry, but no purge or delete (admin)", async () => {
      const p = await signIn(OPERATOR);
      await p.getByRole("button", { name: "Pause" }).waitFor();
      assert.equal(await p.getByRole("button", { name: /Purge dead/ }).count(), 0);
      await p.goto(`${api.base}/#/queue/${encodeURIComponent(Q)}?state=delayed`);
      await p.locator('tr[data-job="t-1"]').getByRole("checkbox").check();
      await p.getByRole("button", { name: "Cancel selected" }).waitFor();
      assert.equal(await p.getByRole("button", { name: "Delete selected" }).count(), 0);
      await p.close();
    });

    test("a token limited to group acme: acme's counts and jobs, nothing of globex", async () => {
      recorder = await startRecorder({
        databaseUrl: s.pg.url,
        redis: s.redis,
        redisUrl: s.redisServer.url,
        pipelines: ["shop"],
        logger: pino({ level: "silent" }),
      });
      const producer = new Producer(s.redis);
      for (const [id, group] of [
        ["ac-done-1", "acme"],
        ["ac-done-2", "acme"],
        ["gx-done-1", "globex"],
        ["gx-done-2", "globex"],
        ["gx-done-3", "globex"],
      ])
        await producer.enqueue(SHOP, { id }, { id, group });
      // Completed with retention 0: only the records know them now.
      const c = new Consumer(s.redis, SHOP, { workerId: "w", leaseMs: 30_000, retentionSeconds: 0 });
      for (const job of (await c.claim(5)).jobs) await c.complete(job, { ok: true });
      for (const [id, group] of [
        ["ac-wait-1", "acme"],
        ["gx-wait-1", "globex"],
        ["gx-wait-2", "globex"],
      ])
        await producer.enqueue(SHOP, { id }, { id, group });
      await s.recorded("id = 'gx-wait-2'", []);
      await s.recorded("id = $1 AND state = 'completed'", ["ac-done-2"]);
      await browser.context.clearCookies();
      const p = await browser.context.newPage();
      p.setDefaultTimeout(30_000);
      const refused: string[] = [];
      p.on("response", (r) => {
        if (r.status() === 403) refused.push(r.url());
      });
      await p.goto(api.base);
      await p.getByLabel("API token").fill(ACME);
      await p.keyboard.press("Enter");
      const row = p.locator(`tr[data-queue="${SHOP}"][data-group="acme"]`);
      await row.waitFor();
      await p.locator('tr[data-job="ac-wait-1"]').waitFor();
      // acme's own numbers, never the queue's (3 waiting, 5 completed).
      assert.deepEqual(await p.locator("[data-count]").allTextContents(), ["1", "0", "2", "0"]);
      assert.equal(await p.locator("tr[data-group]").count(), 1, "one group row: acme's");
      for (const id of ["ac-done-1", "ac-done-2", "ac-wait-1"])
        assert.equal(await p.locator(`tr[data-job="${id}"]`).count(), 1, `${id} listed`);
      const text = (await p.locator("body").textContent()) ?? "";
      assert.doesNotMatch(text, /globex|gx-/i, "nothing of globex");
      assert.equal(await p.getByRole("link", { name: "My groups" }).count(), 1);
      await p.setViewportSize({ width: 1100, height: 700 });
      await p.screenshot({ path: join(REPO, "docs/screenshots/tenant.png") });
      assert.equal(await p.getByRole("link", { name: /^(Queues|Resources|Pools)$/ }).count(), 0);
      // Its search finds its own records-only job and none of globex's.
      await p.getByRole("searchbox", { name: "Search jobs" }).fill("gx-done-1");
      await p.keyboard.press("Enter");
      await p.getByText(/No job matches/).waitFor();
      await p.getByRole("link", { name: "My groups" }).click();
      await row.waitFor();
      // (the shell asks for /queues with the session, before it knows the session's scope)
      assert.deepEqual(
        refused.filter((u) => !u.endsWith("/queues")),
        [],
        "no page the session may not see was asked for",
      );
      await p.close();
    });

    test("the audit page: an admin token sees who paused the queue, filtered by token", async () => {
      const op = await signIn(OPERATOR);
      await op.getByRole("button", { name: "Pause" }).click();
      await op.getByRole("button", { name: "Resume" }).waitFor();
      await op.close();
      const p = await signIn(ADMIN);
      await p.getByRole("link", { name: "Audit" }).click();
      const row = p.locator('tr[data-operation="pause"]');
      await row.waitFor();
      assert.match((await row.textContent()) ?? "", /operator.*operate.*pause.*media\/thumbs.*200/);
      await p.getByLabel("Token").fill("nobody");
      await p.getByRole("button", { name: "Filter" }).click();
      await p.getByText("No change matches.").waitFor();
      assert.match(p.url(), /#\/audit\?token=nobody/);
      await p.close();
    });
  },
);
