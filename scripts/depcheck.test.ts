// The import rules (.dependency-cruiser.cjs, `npm run depcheck`) fail on what they forbid: a
// throwaway tree with one back-import, one cycle and one test importing chaos/ is refused,
// naming each rule; the same tree without them passes.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { promisify } from "node:util";

const REPO = path.resolve(import.meta.dirname, "..");
const DEPCRUISE = path.join(REPO, "node_modules/dependency-cruiser/bin/dependency-cruiser.mjs");

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), "conveyor-depcheck-"));
  writeFileSync(
    path.join(dir, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { allowImportingTsExtensions: true } }),
  );
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

async function depcheck(dir: string): Promise<{ code: number; out: string }> {
  try {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        DEPCRUISE,
        "lib",
        "queue",
        "cli",
        "test",
        "chaos",
        "--config",
        path.join(REPO, ".dependency-cruiser.cjs"),
      ],
      { cwd: dir },
    );
    return { code: 0, out: stdout };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, out: e.stdout + e.stderr };
  }
}

const GOOD = {
  "lib/duration.ts": "export const second = 1000;\n",
  "queue/keys.ts": 'import { second } from "../lib/duration.ts";\nexport const lease = 30 * second;\n',
  "cli/main.ts": 'import { lease } from "../queue/keys.ts";\nconsole.log(lease);\n',
  "chaos/plan.ts": 'import { lease } from "../queue/keys.ts";\nexport const kinds = [lease];\n',
  "test/queue.test.ts": 'import { lease } from "../queue/keys.ts";\nvoid lease;\n',
};

describe("depcheck", { timeout: 120_000 }, () => {
  const dirs: string[] = [];
  after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it("passes a tree whose imports point down", async () => {
    const dir = tree(GOOD);
    dirs.push(dir);
    const r = await depcheck(dir);
    assert.equal(r.code, 0, r.out);
  });

  it("fails on an import upward, a cycle and a test importing chaos/, naming each rule", async () => {
    const dir = tree({
      ...GOOD,
      "queue/keys.ts":
        'import { second } from "../lib/duration.ts";\nimport "../cli/main.ts";\nexport const lease = 30 * second;\n',
      "lib/a.ts": 'import { b } from "./b.ts";\nexport const a = () => b;\n',
      "lib/b.ts": 'import { a } from "./a.ts";\nexport const b = () => a;\n',
      "test/chaos.test.ts": 'import { kinds } from "../chaos/plan.ts";\nvoid kinds;\n',
    });
    dirs.push(dir);
    const r = await depcheck(dir);
    assert.notEqual(r.code, 0, r.out);
    assert.match(r.out, /queue-imports-only-lib: queue\/keys\.ts → cli\/main\.ts/);
    assert.match(r.out, /no-cycles: lib\/a\.ts/);
    assert.match(r.out, /test-not-to-bench-or-chaos: test\/chaos\.test\.ts → chaos\/plan\.ts/);
  });
});
