// The CLI as the images run it: compiled by tsc into dist/-like output, not the TypeScript sources
// that bin/conveyor.js runs in a clone. tsc leaves some `.ts` import() specifiers as they
// are (inside object literals, in ESM), which only shows once the compiled command runs.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { NODE, REPO } from "../support/workers.ts";

// Inside the repository, so the compiled files resolve the packages in its node_modules.
const OUT = join(REPO, "node_modules/.cache/conveyor-compiled-cli");

function run(args: string[], env: Record<string, string> = {}) {
  const entry = `import(${JSON.stringify(join(OUT, "cli/main.js"))}).then((m) => m.main(process.argv.slice(1))).then((c) => process.exit(c))`;
  return spawnSync(NODE, ["-e", entry, ...args], {
    encoding: "utf8",
    env: { PATH: process.env.PATH!, ...env },
  });
}

function jsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".js"))
    .map((e) => join(e.parentPath, e.name));
}

before(() => {
  rmSync(OUT, { recursive: true, force: true });
  const tsc = spawnSync(join(REPO, "node_modules/.bin/tsc"), ["-p", "tsconfig.build.json", "--outDir", OUT], {
    cwd: REPO,
    encoding: "utf8",
  });
  assert.equal(tsc.status, 0, `tsc failed:\n${tsc.stdout}${tsc.stderr}`);
});
after(() => rmSync(OUT, { recursive: true, force: true }));

test("no compiled module imports a .ts file", () => {
  const offenders = jsFiles(OUT).flatMap((f) =>
    [...readFileSync(f, "utf8").matchAll(/import\("(\.{1,2}\/[^"]*\.ts)"\)/g)].map((m) => `${f}: ${m[1]}`),
  );
  assert.deepEqual(offenders, []);
});

test("each command that loads its parts on use reaches its own checks", () => {
  // Each stops at a setting it checks first, so no server starts: exit 2 naming the setting.
  const worker = run(["worker"]);
  assert.equal(worker.status, 2, worker.stderr);
  assert.match(worker.stderr, /CONVEYOR_QUEUE/);
  const api = run(["api"], { REDIS_URL: "redis://127.0.0.1:1", CONVEYOR_API_TOKEN: "short" });
  assert.equal(api.status, 2, api.stderr);
  assert.match(api.stderr, /CONVEYOR_API_TOKEN/);
  const operator = run(["operator", "--workers", "nope"]);
  assert.equal(operator.status, 2, operator.stderr);
  assert.match(operator.stderr, /--workers/);
});
