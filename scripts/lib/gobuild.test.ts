// scripts/lib/gobuild.sh (sourced by test/controlplane/install.sh and test/observability/install.sh)
// in a throwaway cache: a build publishes the cache and the next run is a one-line no-op, prebuilt
// assets are used as they are, and each failure names what failed (no Go build, no network).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";

const LIB = path.join(import.meta.dirname, "gobuild.sh");
const dir = mkdtempSync(path.join(tmpdir(), "conveyor-gobuild-"));
const cache = path.join(dir, "cache");

// A build of two "binaries"; FAIL_STEP makes its second step fail, SKIP_BETA leaves one out,
// START runs the real cold-path start (lock, Go, module proxy probe).
const script = path.join(dir, "install.sh");
writeFileSync(
  script,
  `#!/usr/bin/env bash
# A test build.
set -euo pipefail
BINARIES=(alpha beta)
GOBUILD_NAME=demo GOBUILD_KEY=demo-v1 GOBUILD_ASSETS=DEMO_ASSETS
source ${JSON.stringify(LIB)}
gobuild_init
gobuild_args "$@"
gobuild_use_cached "demo v1"
if [ -n "\${START:-}" ]; then gobuild_start 1.0 example.com/none@v1.0.0; fi
work="$cache_dir.build"; rm -rf "$work"; mkdir -p "$work/bin" "$work/logs"; started=$(date +%s)
step "build alpha" "$work/logs/alpha.log" install -m 755 /dev/null "$work/bin/alpha"
step "build beta" "$work/logs/beta.log" bash -c 'echo compiling beta; [ -z "\${FAIL_STEP:-}" ] || exit 3
  [ -n "\${SKIP_BETA:-}" ] || install -m 755 /dev/null "$0"' "$work/bin/beta"
gobuild_check_built
gobuild_publish "demo v1"
`,
);
chmodSync(script, 0o755);

function run(env: Record<string, string> = {}, args: string[] = []) {
  const out = spawnSync("bash", [script, ...args], {
    env: { PATH: process.env.PATH!, HOME: dir, CONVEYOR_CACHE_DIR: cache, ...env },
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: out.status, out: out.stdout, err: out.stderr };
}

describe("gobuild.sh", { timeout: 120_000 }, () => {
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("a failed step names itself, shows its log and publishes nothing", () => {
    const r = run({ FAIL_STEP: "1" });
    assert.equal(r.code, 3);
    assert.match(r.err, /demo: build beta FAILED after \d+s; last lines of .*beta\.log:\ncompiling beta\n/);
    assert.equal(existsSync(path.join(cache, "demo-v1")), false);
  });

  it("a build that leaves a binary out is refused", () => {
    const r = run({ SKIP_BETA: "1" });
    assert.equal(r.code, 1);
    assert.match(r.err, /demo: error: build finished but binaries are missing: beta/);
  });

  it("a build publishes the cache; the next run is one line and builds nothing", () => {
    const first = run();
    assert.equal(first.code, 0, first.err);
    assert.match(first.err, /demo: build alpha done in \d+s\n/);
    assert.match(
      readFileSync(path.join(cache, "demo-v1", "versions.txt"), "utf8"),
      /^demo v1\ngo .*\nbuilt /,
    );
    const again = run();
    assert.equal(again.code, 0);
    assert.equal(again.err, `demo: cached: ${cache}/demo-v1/bin (demo v1)\n`);
    assert.equal(run({}, ["--print-dir"]).out, `${cache}/demo-v1/bin\n`);
  });

  it("prebuilt assets are used as they are, or refused naming what they lack", () => {
    const bin = path.join(cache, "demo-v1", "bin");
    assert.equal(run({ DEMO_ASSETS: bin }).err, `demo: using DEMO_ASSETS=${bin}\n`);
    const r = run({ DEMO_ASSETS: dir });
    assert.equal(r.code, 1);
    assert.match(r.err, /DEMO_ASSETS=.* lacks: alpha beta \(unset it to build them into /);
  });

  it("an unknown argument is refused", () => {
    const r = run({}, ["--bogus"]);
    assert.equal(r.code, 1);
    assert.equal(r.err, "demo: error: unknown argument '--bogus' (try --help)\n");
  });

  it("an unreachable module proxy is named", { skip: !existsSync("/usr/local/go/bin/go") }, async () => {
    // a loopback port nobody listens on, an empty module cache: the probe fails at once
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    await new Promise((resolve) => server.close(resolve));
    rmSync(path.join(cache, "demo-v1"), { recursive: true });
    const r = run({
      START: "1",
      GOPROXY: `http://127.0.0.1:${port}`,
      GOMODCACHE: path.join(dir, "mod"),
      GOCACHE: path.join(dir, "gocache"),
    });
    assert.equal(r.code, 1);
    assert.match(r.err, /demo: go: go\d/);
    assert.match(
      r.err,
      /demo: error: cannot reach the Go module proxy \(http:\/\/127\.0\.0\.1:\d+\) for example\.com\/none@v1\.0\.0:/,
    );
  });
});
