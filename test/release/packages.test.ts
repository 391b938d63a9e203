// The release's npm packages as users get them: `make release`'s code writes the tarballs, the
// chart, index.yaml, notes and checksums; the library tarball is installed into a fresh empty app
// (its dependencies from the npm registry) that enqueues, claims, completes and reads back a job
// against a real Redis on the machine's Node 20 and on the pinned Node 24, and type-checks against
// the declarations in a strict TypeScript app — with ioredis as its only dependency; with the
// optional peers installed, cron schedules and the tracing entry point work. The CLI tarball
// installs beside it; its bin prints the version, runs the queue commands, a worker that
// completes a job, and `conveyor api` serving the dashboard's built files.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parse } from "yaml";
import { connectRedis, QueueAdmin, Producer, SCRIPT_NAMES, scriptSource } from "../../queue/index.ts";
import { RedisServer } from "../support/redis.ts";
import { startProcess, stopProcess, waitFor } from "../support/processes.ts";
import { freePort } from "../support/ports.ts";
import { setTimeout as sleep } from "node:timers/promises";
import { LIBRARY, CLI, listFiles, readJson, ROOT, rootVersion } from "../../scripts/release/packages.ts";
import { helmBinary, release, type ReleaseArtifacts } from "../../scripts/release/main.ts";

const CHART_REPO = "https://charts.example.com/conveyor";
/** The Node 20 type declarations an app on Node 20 compiles with (exact, from the registry). */
const TYPES_NODE_20 = "@types/node@20.19.43";
const TSC = join(ROOT, "node_modules", "typescript", "bin", "tsc");

/** The machine's Node 20–23 (CONVEYOR_NODE20 overrides); the pinned Node 24 runs this test. */
function olderNode(): { bin: string; version: string } | null {
  for (const bin of [process.env["CONVEYOR_NODE20"], "/usr/bin/node", "/usr/local/bin/node"]) {
    if (!bin || !existsSync(bin)) continue;
    const version =
      spawnSync(bin, ["-p", "process.versions.node"], { encoding: "utf8" }).stdout?.trim() ?? "";
    const major = Number(version.split(".")[0]);
    if (major >= 20 && major < 24) return { bin, version };
  }
  return null;
}

function npm(cwd: string, ...args: string[]): string {
  const res = spawnSync("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd,
    encoding: "utf8",
  });
  assert.equal(res.status, 0, `npm ${args.join(" ")} in ${cwd}:\n${res.stdout}${res.stderr}`);
  return res.stdout;
}

/**
 * A temporary directory no ancestor of which holds a node_modules (a shared /tmp may): an app
 * there resolves only what it installed itself.
 */
function isolatedTmpdir(): string {
  for (const base of [tmpdir(), "/var/tmp", "/dev/shm"]) {
    let clean = existsSync(base);
    for (let dir = base; clean; dir = dirname(dir)) {
      if (existsSync(join(dir, "node_modules"))) clean = false;
      if (dirname(dir) === dir) break;
    }
    if (clean) return mkdtempSync(join(base, "conveyor-release-"));
  }
  throw new Error(`every temporary directory has a node_modules above it (${tmpdir()}, /var/tmp, /dev/shm)`);
}

function freshApp(dir: string): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  return dir;
}

function run(bin: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) {
  const res = spawnSync(bin, args, {
    cwd,
    encoding: "utf8",
    env: { ...process.env, ...env },
    timeout: 120_000,
  });
  return { code: res.status, stdout: res.stdout ?? "", stderr: res.stderr ?? "" };
}

// What an application does with the library: plain JS, the package's public entry point only.
// Without croner installed an interval schedule works and a cron schedule names the package;
// without ajv a stage contract names it.
const APP_JS = `
import { connectRedis, Consumer, Producer, QueueAdmin, QueueEvents, Schedules, setContract } from "@conveyor-dev/queue";
const redis = connectRedis(process.env.REDIS_URL);
const queue = process.argv[2];
const { id } = await new Producer(redis).enqueue(queue, { to: "a@example.com" }, { attempts: 2 });
const admin = new QueueAdmin(redis);
const enqueued = await admin.job(id);
const consumer = new Consumer(redis, queue, { workerId: "app", leaseMs: 30000 });
const { jobs } = await consumer.claim(1);
const completed = await consumer.complete(jobs[0], { sent: true });
const done = await admin.job(id);
const events = (await new QueueEvents(redis).recent(queue)).map((e) => e.type);
const schedule = await new Schedules(redis).add(queue + "-every", "hourly", { everyMs: 3600000 });
const cron = await new Schedules(redis).add(queue + "-cron", "nightly", { cron: "0 3 * * *" }).catch((e) => e.message);
const contract = await setContract(redis, queue + "-typed", { data: { type: "object" } }, "app").catch((e) => e.message);
console.log(JSON.stringify({ node: process.versions.node, id, enqueued, claimed: jobs.map((j) => j.id), completed, done, events, nextRun: schedule.nextRun, cron, contract }));
redis.disconnect();
`;

// The optional peers' features, once the app installs croner, @opentelemetry/api, ajv and ajv-formats.
const PEERS_JS = `
import { connectRedis, enableTracing, Producer, Schedules, setContract } from "@conveyor-dev/queue";
import { activeTracer, startSendSpan } from "@conveyor-dev/queue/tracing";
const redis = connectRedis(process.env.REDIS_URL);
const schedule = await new Schedules(redis).add(process.argv[2], "nightly", { cron: "0 3 * * *", tz: "Europe/Berlin" });
const before = activeTracer();
enableTracing();
// No SDK in this app: the API's no-op tracer, but loaded and used by the library.
const send = startSendSpan("q", ["1"]);
send?.span.end();
const typed = process.argv[2] + "-typed";
await setContract(redis, typed, { data: { type: "object", required: ["email"], properties: { email: { type: "string", format: "email" } } } }, "app");
const refused = await new Producer(redis).enqueue(typed, { email: "nope" }).then(() => "enqueued", (e) => e.name + ": " + e.message);
console.log(JSON.stringify({ nextRun: schedule.nextRun, tracerBefore: before !== undefined, tracer: typeof activeTracer()?.startSpan, sent: send !== null, refused }));
redis.disconnect();
`;

// Strict TypeScript against the declarations; each @ts-expect-error must be an error, so the
// types cannot be \`any\`.
const APP_TS = `
import {
  connectRedis, Producer, QueueAdmin, QueueEvents, Consumer, PayloadTooLargeError, SCRIPT_NAMES, enableTracing,
  type EnqueueOptions, type EnqueueResult, type JobInfo, type QueueCounts, type ScriptName,
} from "@conveyor-dev/queue";
const redis = connectRedis(process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379");
const opts: EnqueueOptions = { priority: 5, attempts: 3, idempotencyKey: "k" };
const result: EnqueueResult = await new Producer(redis).enqueue("emails", { to: "a" }, opts);
const job: JobInfo | null = await new QueueAdmin(redis).job(result.id);
const counts: QueueCounts = await new QueueAdmin(redis).counts("emails");
const first: ScriptName = SCRIPT_NAMES[0];
const state: string | undefined = job?.state;
new Consumer(redis, "emails", { workerId: "w", leaseMs: 1000 });
void new QueueEvents(redis);
void (PayloadTooLargeError.prototype instanceof Error);
void enableTracing;
// @ts-expect-error the queue is a string
await new Producer(redis).enqueue(42, {});
// @ts-expect-error priority is a number
const bad: EnqueueOptions = { priority: "high" };
// @ts-expect-error a consumer needs its worker id and lease
new Consumer(redis, "emails", {});
console.log(counts.backlog, first, state, bad);
`;

describe("release packages (make release)", { timeout: 30 * 60_000 }, () => {
  let tmp: string;
  let redis: RedisServer;
  let artifacts: ReleaseArtifacts;
  const version = rootVersion();

  before(async () => {
    tmp = isolatedTmpdir();
    redis = await RedisServer.start();
    // The current version: writes nothing in the repository (package.json, Chart.yaml and
    // CHANGELOG.md already carry it).
    artifacts = release({
      version,
      out: join(tmp, "release"),
      stageDir: join(tmp, "stage"),
      chartRepoUrl: CHART_REPO,
      images: false,
    });
  });

  after(async () => {
    await redis?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it("writes both npm tarballs, the chart, index.yaml, notes and checksums, all of one version", () => {
    const out = join(tmp, "release");
    assert.equal(artifacts.library, join(out, "npm", `conveyor-dev-queue-${version}.tgz`));
    assert.equal(artifacts.cli, join(out, "npm", `conveyor-dev-conveyor-${version}.tgz`));
    assert.equal(artifacts.chart, join(out, "charts", `conveyor-${version}.tgz`));
    const chart = parse(execFileSync(helmBinary(), ["show", "chart", artifacts.chart], { encoding: "utf8" }));
    assert.equal(chart.version, version);
    assert.equal(chart.appVersion, version);
    const index = parse(readFileSync(artifacts.index, "utf8"));
    const entry = index.entries.conveyor.find((e: { version: string }) => e.version === version);
    assert.ok(entry, `index.yaml lists conveyor ${version}`);
    assert.equal(entry.appVersion, version);
    assert.deepEqual(entry.urls, [`${CHART_REPO}/conveyor-${version}.tgz`]);
    assert.match(readFileSync(artifacts.notes, "utf8"), new RegExp(`^# Conveyor ${version}\\n\\n### Added`));
    const sums = readFileSync(join(out, "SHA256SUMS"), "utf8").trim().split("\n");
    assert.equal(sums.length, 5);
    for (const line of sums) {
      const [sum, file] = line.split(/ {2}/) as [string, string];
      assert.equal(
        createHash("sha256")
          .update(readFileSync(join(out, file)))
          .digest("hex"),
        sum,
        file,
      );
    }
  });

  it("the library tarball holds ESM with declarations and the resolved scripts; it depends on ioredis only, croner, the OpenTelemetry API and ajv are optional peers", () => {
    const dir = join(tmp, "library-contents");
    mkdirSync(dir);
    execFileSync("tar", ["-xzf", artifacts.library, "-C", dir]);
    const pkg = readJson(join(dir, "package", "package.json"));
    assert.equal(pkg["name"], LIBRARY);
    assert.equal(pkg.version, version);
    assert.equal(pkg["type"], "module");
    assert.deepEqual(pkg["engines"], { node: ">=20" });
    // ioredis only; a new dependency is a decision. croner (cron schedules), @opentelemetry/api
    // (tracing), ajv and ajv-formats (stage contracts) are optional peers, required when a
    // feature first needs them.
    const root = readJson(join(ROOT, "package.json"));
    assert.deepEqual(pkg.dependencies, { ioredis: root.dependencies!["ioredis"] });
    const peers = ["@opentelemetry/api", "ajv", "ajv-formats", "croner"];
    assert.deepEqual(
      pkg.peerDependencies,
      Object.fromEntries(peers.map((p) => [p, `^${root.dependencies![p]}`])),
    );
    assert.deepEqual(
      pkg["peerDependenciesMeta"],
      Object.fromEntries(peers.map((p) => [p, { optional: true }])),
    );
    const files = listFiles(join(dir, "package")).map((f) => f.slice(join(dir, "package").length + 1));
    assert.deepEqual(
      files.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts")),
      [],
      "no TypeScript sources",
    );
    for (const js of files.filter((f) => f.endsWith(".js")))
      assert.ok(files.includes(js.replace(/\.js$/, ".d.ts")), `${js} has declarations`);
    for (const dts of files.filter((f) => f.endsWith(".d.ts")))
      assert.doesNotMatch(readFileSync(join(dir, "package", dts), "utf8"), /from "\.[^"]*\.ts"/, dts);
    for (const name of SCRIPT_NAMES)
      assert.equal(
        readFileSync(join(dir, "package", "dist", "queue", "scripts", `${name}.lua`), "utf8"),
        scriptSource(name),
        `${name}.lua is the resolved script`,
      );
  });

  it("installed into a fresh app from the registry with ioredis alone, enqueues and reads back a job on Node 20 and Node 24", () => {
    const app = freshApp(join(tmp, "app"));
    npm(app, "install", artifacts.library, TYPES_NODE_20);
    // Everything installed is the library, ioredis and ioredis's own dependencies (and the types).
    const installed = readJson<{ packages: Record<string, { dependencies?: Record<string, string> }> }>(
      join(app, "node_modules", ".package-lock.json"),
    ).packages;
    const closure = new Set<string>();
    for (const queue = ["ioredis", "@types/node"]; queue.length > 0;) {
      const name = queue.pop()!;
      if (closure.has(name)) continue;
      closure.add(name);
      queue.push(...Object.keys(installed[`node_modules/${name}`]?.dependencies ?? {}));
    }
    assert.deepEqual(
      Object.keys(installed)
        .filter((p) => p.startsWith("node_modules/"))
        .map((p) => p.slice(p.lastIndexOf("node_modules/") + "node_modules/".length))
        .filter((name) => !closure.has(name))
        .sort(),
      [LIBRARY],
      "nothing but ioredis and its dependencies",
    );
    for (const heavy of [
      "@kubernetes/client-node",
      "pg",
      "pino",
      "prom-client",
      "yaml",
      "@conveyor-dev/conveyor",
    ])
      assert.ok(!existsSync(join(app, "node_modules", heavy)), `the library does not bring ${heavy}`);
    writeFileSync(join(app, "main.js"), APP_JS);
    const older = olderNode();
    assert.ok(older, "no Node 20-23 on this machine (/usr/bin/node; set CONVEYOR_NODE20=/path/to/node)");
    for (const node of [older.bin, process.execPath]) {
      const queue = `app-${node === process.execPath ? "24" : "20"}`;
      const res = run(node, ["main.js", queue], app, { REDIS_URL: redis.url });
      assert.equal(res.code, 0, `${node}: ${res.stdout}${res.stderr}`);
      const out = JSON.parse(res.stdout);
      assert.equal(
        out.node.split(".")[0],
        node === process.execPath ? process.versions.node.split(".")[0] : older.version.split(".")[0],
      );
      assert.equal(out.enqueued.state, "ready");
      assert.deepEqual(out.claimed, [out.id]);
      assert.equal(out.completed, true);
      assert.equal(out.done.state, "completed");
      assert.deepEqual(JSON.parse(out.done.result), { sent: true });
      assert.ok(out.events.includes("completed"), `events: ${out.events}`);
      assert.ok(out.nextRun > Date.now(), "an interval schedule's next run is ahead");
      assert.match(out.cron, /A cron schedule needs the croner package: npm install croner/);
      assert.match(out.contract, /A stage contract needs the ajv package: npm install ajv/);
    }
  });

  it("its type declarations compile in a strict TypeScript app (Node 20 types, no skipLibCheck)", () => {
    const app = join(tmp, "app");
    writeFileSync(join(app, "app.ts"), APP_TS);
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2022",
          module: "nodenext",
          moduleResolution: "nodenext",
          strict: true,
          noUncheckedIndexedAccess: true,
          exactOptionalPropertyTypes: true,
          skipLibCheck: false,
          types: ["node"],
          noEmit: true,
        },
        files: ["app.ts"],
      }),
    );
    const res = run(process.execPath, [TSC, "-p", "tsconfig.json"], app);
    assert.equal(res.code, 0, `tsc:\n${res.stdout}${res.stderr}`);
  });

  it("with its optional peers installed, cron schedules, the tracing entry point and stage contracts work on Node 20 and Node 24", () => {
    const app = join(tmp, "app");
    const root = readJson(join(ROOT, "package.json"));
    npm(
      app,
      "install",
      `croner@${root.dependencies!["croner"]}`,
      `@opentelemetry/api@${root.dependencies!["@opentelemetry/api"]}`,
      `ajv@${root.dependencies!["ajv"]}`,
      `ajv-formats@${root.dependencies!["ajv-formats"]}`,
    );
    writeFileSync(join(app, "peers.js"), PEERS_JS);
    for (const node of [olderNode()!.bin, process.execPath]) {
      const res = run(node, ["peers.js", `peers-${node === process.execPath ? "24" : "20"}`], app, {
        REDIS_URL: redis.url,
      });
      assert.equal(res.code, 0, `${node}: ${res.stdout}${res.stderr}`);
      const out = JSON.parse(res.stdout);
      assert.ok(out.nextRun > Date.now(), "a cron schedule's next run (croner) is ahead");
      assert.deepEqual(
        { tracerBefore: out.tracerBefore, tracer: out.tracer, sent: out.sent },
        { tracerBefore: false, tracer: "function", sent: true },
        "enableTracing() turns the spans on through the OpenTelemetry API",
      );
      assert.match(
        out.refused,
        /^ContractViolationError: .*\/email: must match format "email"/,
        "ajv checks the contract",
      );
    }
  });

  it("the CLI package installs beside the library; its bin prints the version, runs the queue commands, a worker and the API with the dashboard", async () => {
    const dir = freshApp(join(tmp, "cli"));
    npm(dir, "install", artifacts.library, artifacts.cli);
    const pkg = join(dir, "node_modules", "@conveyor-dev", "conveyor");
    assert.equal(readJson(join(pkg, "package.json")).dependencies![LIBRARY], version);
    assert.ok(!existsSync(join(pkg, "dist", "queue")), `${CLI} carries no copy of the queue code`);
    assert.ok(!existsSync(join(pkg, "node_modules")), `${CLI} uses the one installed ${LIBRARY}`);
    const conveyor = join(dir, "node_modules", ".bin", "conveyor");
    const env = {
      REDIS_URL: redis.url,
      PATH: `${join(ROOT, "node_modules", ".bin")}:${process.env["PATH"]}`,
    };
    const versionOut = run(conveyor, ["--version"], dir, env);
    assert.equal(versionOut.stdout.trim(), version, versionOut.stderr);
    const help = run(conveyor, ["--help"], dir, env);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /usage: conveyor <command>/);
    const enqueued = run(conveyor, ["enqueue", "cli-jobs", '{"to":"b@example.com"}'], dir, env);
    assert.equal(enqueued.code, 0, enqueued.stderr);
    const id = enqueued.stdout.trim();
    const stats = run(conveyor, ["stats", "cli-jobs", "--json"], dir, env);
    assert.equal(JSON.parse(stats.stdout).ready, 1, stats.stderr);

    writeFileSync(join(dir, "handler.mjs"), "export default async (job) => ({ echoed: job.data });\n");
    const log = join(tmp, "worker.log");
    const worker = startProcess(
      conveyor,
      [
        "worker",
        "--queue",
        "cli-jobs",
        "--handler",
        "module:./handler.mjs",
        "--port",
        "0",
        "--max-jobs",
        "1",
      ],
      { cwd: dir, env: { ...process.env, ...env }, logFile: log },
    );
    // --max-jobs 1: the worker drains and exits 0 after its one job.
    const code = await Promise.race([worker.exited, sleep(180_000).then(() => "still running after 3 min")]);
    await stopProcess(worker);
    assert.equal(code, 0, readFileSync(log, "utf8"));
    const client = connectRedis(redis.url);
    try {
      const job = await new QueueAdmin(client).job(id);
      assert.equal(job?.state, "completed", JSON.stringify(job));
      assert.deepEqual(JSON.parse(job!.result!), { echoed: { to: "b@example.com" } });
      // and the source tree's producer agrees with the package's worker on the protocol
      await new Producer(client).enqueue("cli-jobs", { n: 2 });
      assert.equal(JSON.parse(run(conveyor, ["stats", "cli-jobs", "--json"], dir, env).stdout).ready, 1);
    } finally {
      client.disconnect();
    }

    // `conveyor api` serves the dashboard the package carries (dist/dashboard).
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const api = startProcess(conveyor, ["api", "--port", String(port), "--host", "127.0.0.1"], {
      cwd: dir,
      env: { ...process.env, ...env, CONVEYOR_API_TOKEN: "release-test-token" },
      logFile: join(tmp, "api.log"),
    });
    try {
      await waitFor(
        "conveyor api up",
        async () => (await fetch(`${base}/healthz`).catch(() => null))?.ok,
        120_000,
      );
      const index = await fetch(`${base}/`);
      assert.equal(index.status, 200);
      assert.match(index.headers.get("content-type") ?? "", /^text\/html/);
      const html = await index.text();
      assert.equal(html, readFileSync(join(pkg, "dist", "dashboard", "index.html"), "utf8"));
      const script = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
      assert.ok(script, `the index loads its script: ${html}`);
      const asset = await fetch(`${base}${script}`);
      assert.equal(asset.status, 200, script);
      assert.match(asset.headers.get("content-type") ?? "", /javascript/);
    } finally {
      await stopProcess(api);
    }
  });
});
