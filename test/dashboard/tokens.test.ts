// The dashboard in a real headless Chromium signed in with named tokens (api/tokens.ts): a
// read-only token sees the queue with no action, an operate token pauses but has no purge or
// delete (admin), and a revoked token's page goes back to sign-in.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { hashToken, writeTokensFile, type Scope } from "../../api/tokens.ts";
import { Producer } from "../../queue/index.ts";
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
const scope = (verbs: Scope["verbs"]): Scope => ({ pipelines: ["media"], queues: null, groups: null, verbs });

describe(
  "dashboard with scoped tokens",
  { skip: !existsSync(CHROMIUM) && `${CHROMIUM} is not installed (scripts/system-deps.sh)` },
  () => {
    let s: DashboardStack;
    let api: ApiProcess;
    let browser: Awaited<ReturnType<typeof launchBrowser>>;
    let file: string;

    before(async () => {
      buildDashboard();
      s = await DashboardStack.start({ queues: [] });
      file = join(s.dir, "tokens.yaml");
      writeTokensFile(file, [
        { name: "reader", hash: hashToken(READER), scopes: scope(["read"]) },
        { name: "operator", hash: hashToken(OPERATOR), scopes: scope(["read", "operate"]) },
        { name: "admin", hash: hashToken(ADMIN), scopes: scope(["read", "operate", "admin"]) },
      ]);
      await new Producer(s.redis).enqueue(Q, { n: 1 }, { id: "t-1", delayMs: 3_600_000 });
      api = await s.startApi("api-tokens", ["--tokens-file", file]);
      browser = await launchBrowser();
    });
    after(async () => {
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
