// The container images' sources (Dockerfile, .dockerignore, examples/handlers/Dockerfile), without
// building them (worker.test.ts and operator.test.ts beside this run the built images): BuildKit's
// own Dockerfile checks (images/lint, the rules `docker build --check` runs, offline) and our policy (pinned Node 24 bookworm-slim bases, numeric non-root USER, tini as
// PID 1 without -g, exec-form ENTRYPOINT/CMD, install scripts skipped, production dependencies
// only at run time, the worker's without the Kubernetes client, OCI labels).
import { describe, it, before } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { promisify } from "node:util";

const execFileP = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, "..", "..");
const LINT_SRC = path.join(ROOT, "images", "lint");
const DOCKERFILE = path.join(ROOT, "Dockerfile");
const HANDLERS = path.join(ROOT, "examples", "handlers");
const NODE_BASE = /^node:24\.\d+\.\d+-bookworm-slim$/;

// ---- a small Dockerfile reader (enough for our policy checks; BuildKit's parser lints)

interface Instruction {
  cmd: string;
  args: string;
  line: number;
}
interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

function parseDockerfile(text: string): { args: Map<string, string>; stages: Stage[] } {
  const logical: { text: string; line: number }[] = [];
  let buf = "";
  let start = 0;
  text.split("\n").forEach((raw, i) => {
    const line = raw.replace(/\r$/, "");
    if (!buf && (/^\s*#/.test(line) || !line.trim())) return;
    if (!buf) start = i + 1;
    if (/^\s*#/.test(line)) return; // comment inside a continuation
    if (line.endsWith("\\")) buf += `${line.slice(0, -1)} `;
    else {
      logical.push({ text: (buf + line).trim(), line: start });
      buf = "";
    }
  });
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const { text: l, line } of logical) {
    const m = /^(\S+)\s*(.*)$/s.exec(l)!;
    const cmd = m[1]!.toUpperCase();
    const rest = m[2]!;
    if (cmd === "FROM") {
      const [from, as, name] = rest.split(/\s+/);
      stages.push({ from: from!, name: as?.toUpperCase() === "AS" ? name : undefined, instructions: [] });
    } else if (stages.length === 0) {
      if (cmd === "ARG") {
        const [k, v = ""] = rest.split("=", 2);
        args.set(k!.trim(), v.trim());
      }
    } else stages.at(-1)!.instructions.push({ cmd, args: rest, line });
  }
  return { args, stages };
}

const resolveArgs = (s: string, args: Map<string, string>) =>
  s.replace(/\$\{?(\w+)\}?/g, (_, k: string) => args.get(k) ?? `$${k}`);

/** The stage chain of a stage: itself, its base stage, ... (by FROM <stage>). */
function chain(stages: Stage[], stage: Stage): Stage[] {
  const out = [stage];
  let cur = stage;
  for (;;) {
    const base = stages.find((s) => s.name && s.name === cur.from);
    if (!base) return out;
    out.push(base);
    cur = base;
  }
}

/** The value an instruction has for a target stage (the last one in its chain wins). */
function effective(stages: Stage[], stage: Stage, cmd: string): Instruction | undefined {
  for (const s of chain(stages, stage)) {
    const found = s.instructions.filter((i) => i.cmd === cmd).at(-1);
    if (found) return found;
  }
  return undefined;
}

function execForm(i: Instruction | undefined): string[] | undefined {
  if (!i) return undefined;
  try {
    const v = JSON.parse(i.args) as unknown;
    return Array.isArray(v) && v.every((x) => typeof x === "string") ? (v as string[]) : undefined;
  } catch {
    return undefined;
  }
}

// ---- the BuildKit linter (images/lint), built once per source version into the cache

function goBinary(): string {
  for (const c of [
    process.env.GO,
    "/usr/local/go/bin/go",
    ...(process.env.PATH ?? "").split(":").map((d) => path.join(d, "go")),
  ]) {
    if (c && fs.existsSync(c)) return c;
  }
  throw new Error(
    "Go is needed to build images/lint (BuildKit's Dockerfile linter): install Go (the control plane needs it too)",
  );
}

async function buildLinter(): Promise<string> {
  const h = createHash("sha256");
  for (const f of fs.readdirSync(LINT_SRC).sort())
    h.update(f).update(fs.readFileSync(path.join(LINT_SRC, f)));
  const cacheRoot = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache");
  const dir = path.join(cacheRoot, "conveyor", `dockerfile-lint-${h.digest("hex").slice(0, 16)}`);
  const bin = path.join(dir, "dockerfile-lint");
  if (fs.existsSync(bin)) return bin;
  fs.mkdirSync(dir, { recursive: true });
  const tmpBin = `${bin}.${process.pid}.tmp`;
  await execFileP(goBinary(), ["build", "-mod=readonly", "-trimpath", "-o", tmpBin, "."], {
    cwd: LINT_SRC,
    env: { ...process.env, CGO_ENABLED: "0" },
    timeout: 20 * 60_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  fs.renameSync(tmpBin, bin);
  return bin;
}

interface LintReport {
  file: string;
  warnings: { rule: string; message: string; line?: number }[];
  error?: string;
}

function lint(bin: string, context: string, file: string): LintReport {
  const res = spawnSync(bin, ["-context", context, file], { encoding: "utf8" });
  assert.ok(res.status === 0 || res.status === 1, `dockerfile-lint failed: ${res.stderr}`);
  return JSON.parse(res.stdout) as LintReport;
}

describe("container images", { timeout: 25 * 60_000 }, () => {
  let linter: string;
  const df = parseDockerfile(fs.readFileSync(DOCKERFILE, "utf8"));
  const handlersDf = parseDockerfile(fs.readFileSync(path.join(HANDLERS, "Dockerfile"), "utf8"));
  const target = (name: string) => df.stages.find((s) => s.name === name)!;

  before(async () => {
    linter = await buildLinter();
  });

  it("passes BuildKit's checks (all rules, experimental included), .dockerignore included", () => {
    for (const [context, file] of [
      [ROOT, DOCKERFILE],
      [HANDLERS, path.join(HANDLERS, "Dockerfile")],
    ] as const) {
      const report = lint(linter, context, file);
      assert.equal(report.error, undefined, `${file}: ${report.error}`);
      assert.deepEqual(report.warnings, [], file);
    }
  });

  it("the linter does find problems (it is not a no-op)", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "conveyor-lint-"));
    try {
      fs.writeFileSync(
        path.join(dir, "Dockerfile"),
        "from node:24 as build\nARG API_TOKEN=x\nENV A $UNDEFINED_THING\nCOPY secret.env /x\nCMD node app.js\n",
      );
      fs.writeFileSync(path.join(dir, ".dockerignore"), "*.env\n");
      const rules = new Set(lint(linter, dir, path.join(dir, "Dockerfile")).warnings.map((w) => w.rule));
      for (const r of [
        "ConsistentInstructionCasing",
        "SecretsUsedInArgOrEnv",
        "UndefinedVar",
        "LegacyKeyValueFormat",
        "JSONArgsRecommended",
        "CopyIgnoredFile",
      ]) {
        assert.ok(rules.has(r), `expected ${r} in ${[...rules].join(", ")}`);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("builds from pinned Node 24 bookworm-slim bases, never latest", () => {
    for (const { args, stages } of [df, handlersDf]) {
      const stageNames = new Set(stages.map((s) => s.name).filter(Boolean));
      for (const s of stages) {
        if (stageNames.has(s.from)) continue;
        const image = resolveArgs(s.from, args);
        assert.ok(!/\$/.test(image), `FROM ${s.from}: unresolved`);
        assert.ok(!/:latest$/.test(image) && /[:@]/.test(image), `FROM ${image}: pin a tag or digest`);
        if (image.startsWith("node:")) assert.match(image, NODE_BASE);
      }
    }
    assert.match(df.args.get("NODE_IMAGE")!, NODE_BASE);
    assert.equal(
      handlersDf.args.get("NODE_IMAGE"),
      df.args.get("NODE_IMAGE"),
      "handler deps are installed with the same Node",
    );
    // The Node in the image is the one the repository pins (package.json devDependency "node").
    const pinned = (
      JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
        devDependencies: Record<string, string>;
      }
    ).devDependencies.node;
    assert.equal(df.args.get("NODE_IMAGE"), `node:${pinned}-bookworm-slim`);
  });

  it("has worker (default) and operator targets: numeric non-root USER, tini without -g, exec form", () => {
    assert.equal(df.stages.at(-1)!.name, "worker", "the last stage (the default target) is the worker");
    for (const [name, cmd, port] of [
      ["worker", "worker", "9464/tcp"],
      ["worker-python", "worker", "9464/tcp"],
      ["operator", "operator", "8080/tcp"],
    ] as const) {
      const t = target(name);
      const user = effective(df.stages, t, "USER")!.args;
      assert.match(
        user,
        /^[1-9]\d*:[1-9]\d*$/,
        `${name}: USER uid:gid, numeric (runAsNonRoot can verify it), not root`,
      );
      const entry = execForm(effective(df.stages, t, "ENTRYPOINT"));
      assert.deepEqual(entry?.slice(0, 2), ["/usr/bin/tini", "--"], `${name}: tini is PID 1`);
      assert.ok(
        !entry!.includes("-g"),
        "tini without -g: the pod SIGTERM goes to node only, never to command-handler children",
      );
      assert.equal(entry!.at(-1), "/usr/local/bin/conveyor");
      assert.deepEqual(execForm(effective(df.stages, t, "CMD")), [cmd]);
      assert.ok(effective(df.stages, t, "EXPOSE")!.args.split(/\s+/).includes(port));
      assert.equal(effective(df.stages, t, "HEALTHCHECK"), undefined, "Kubernetes probes, not HEALTHCHECK");
    }
    // the operator's pods run as the uid the image declares
    assert.equal(effective(df.stages, target("worker"), "USER")!.args, "65532:65532");
    const handlersUser = handlersDf.stages
      .at(-1)!
      .instructions.filter((i) => i.cmd === "USER")
      .at(-1);
    assert.equal(handlersUser?.args, "65532:65532");
  });

  it("skips install scripts, ships production dependencies only, writes nothing outside /tmp", () => {
    for (const { stages } of [df, handlersDf]) {
      for (const s of stages) {
        for (const i of s.instructions) {
          assert.notEqual(i.cmd, "ADD", `line ${i.line}: COPY, not ADD`);
          if (i.cmd !== "RUN") continue;
          for (const npm of i.args.match(/npm (ci|install)[^&;|]*/g) ?? [])
            assert.match(npm, /--ignore-scripts/, `line ${i.line}: ${npm}`);
          if (/apt-get install/.test(i.args)) {
            assert.match(i.args, /--no-install-recommends/);
            assert.match(i.args, /rm -rf \/var\/lib\/apt\/lists/);
            for (const pkg of i.args
              .split("apt-get install")[1]!
              .split("&&")[0]!
              .split(/\s+/)
              .filter((w) => w && !w.startsWith("-")))
              assert.match(pkg, /=/, `apt package ${pkg} pinned`);
          }
          assert.doesNotMatch(
            i.args,
            /curl|wget/,
            `line ${i.line}: nothing is downloaded outside package managers`,
          );
        }
      }
    }
    // The images install the packed npm packages (scripts/release/packages.ts), as npm users do.
    const build = df.stages.find((s) => s.name === "build")!;
    assert.ok(
      build.instructions.some(
        (i) => i.cmd === "RUN" && /node scripts\/release\/packages\.ts \/src\/npm/.test(i.args),
      ),
      "the build stage packs the npm packages",
    );
    const deps = df.stages.find((s) => s.name === "deps")!;
    const depsRun = deps.instructions.find((i) => i.cmd === "RUN")!.args;
    assert.match(depsRun, /tar -xzf \/tmp\/npm\/conveyor-dev-conveyor-\*\.tgz/, "/app is the packed command");
    assert.match(
      depsRun,
      /npm install --omit=dev --ignore-scripts .*\/tmp\/npm\/conveyor-dev-queue-\*\.tgz/,
      "the packed library, production dependencies only",
    );
    assert.match(
      depsRun,
      /cp \/tmp\/npm\/package-lock\.json/,
      "dependency versions from the repository's lock",
    );
    const runtime = df.stages.find((s) => s.name === "runtime")!;
    const nodeModulesFrom = (stage: string) =>
      chain(df.stages, target(stage))
        .flatMap((s) => s.instructions)
        .filter((i) => i.cmd === "COPY" && /node_modules/.test(i.args))
        .map((i) => i.args.split(/\s+/)[0]);
    assert.deepEqual(nodeModulesFrom("operator"), ["--from=deps"], "production dependencies only");
    assert.deepEqual(nodeModulesFrom("worker"), ["--from=worker-deps"], "the worker's own dependencies");
    assert.deepEqual(
      nodeModulesFrom("worker-python"),
      ["--from=worker-deps"],
      "the worker's own dependencies",
    );
    const workerDeps = target("worker-deps");
    assert.equal(workerDeps.from, "deps");
    assert.match(
      workerDeps.instructions.find((i) => i.cmd === "RUN")!.args,
      /npm uninstall --no-save .*@kubernetes\/client-node/,
      "the worker image leaves out the operator's Kubernetes client",
    );
    // apt leaves no lists or caches whatever the base image's apt settings
    const aptRun = runtime.instructions.find((i) => i.cmd === "RUN" && /apt-get install/.test(i.args))!;
    assert.match(aptRun.args, /apt-get clean/);
    const env = runtime.instructions
      .filter((i) => i.cmd === "ENV")
      .map((i) => i.args)
      .join(" ");
    assert.match(env, /HOME=\/tmp/);
    assert.match(env, /TMPDIR=\/tmp/);
    assert.match(env, /NODE_ENV=production/);
  });

  it("only the operator imports the Kubernetes client (the worker image does not have it)", () => {
    const importers: string[] = [];
    for (const dir of ["api", "cli", "queue", "worker", "operator", "bin"]) {
      for (const f of fs.readdirSync(path.join(ROOT, dir), { recursive: true, encoding: "utf8" })) {
        if (!/\.(ts|js)$/.test(f) || f.endsWith(".test.ts")) continue;
        if (/from "@kubernetes\/client-node"/.test(fs.readFileSync(path.join(ROOT, dir, f), "utf8")))
          importers.push(`${dir}/${f}`);
      }
    }
    assert.ok(importers.length > 0);
    assert.deepEqual(
      importers.filter((f) => !f.startsWith("operator/")),
      [],
      "imported outside operator/",
    );
  });

  it("labels both images with OCI source, version and revision (build args)", () => {
    for (const name of ["worker", "worker-python", "operator"]) {
      const labels = chain(df.stages, target(name))
        .flatMap((s) => s.instructions)
        .filter((i) => i.cmd === "LABEL")
        .map((i) => i.args)
        .join(" ");
      assert.match(labels, /org\.opencontainers\.image\.source="https:\/\//);
      assert.match(labels, /org\.opencontainers\.image\.version="\$\{VERSION\}"/);
      assert.match(labels, /org\.opencontainers\.image\.revision="\$\{REVISION\}"/);
      const args = target(name)
        .instructions.filter((i) => i.cmd === "ARG")
        .map((i) => i.args.split("=")[0]);
      assert.deepEqual(args.sort(), ["REVISION", "VERSION"]);
    }
  });

  it("copies only what exists and .dockerignore lets through; the context leaves out secrets and bulk", () => {
    const ignore = fs
      .readFileSync(path.join(ROOT, ".dockerignore"), "utf8")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith("#"));
    assert.equal(ignore[0], "*", "allowlist: everything is excluded unless listed");
    const allowed = ignore.filter((l) => l.startsWith("!")).map((l) => l.slice(1));
    for (const s of df.stages) {
      for (const i of s.instructions.filter((x) => x.cmd === "COPY" && !/--from=/.test(x.args))) {
        const parts = i.args.split(/\s+/).filter((p) => !p.startsWith("--"));
        for (const src of parts.slice(0, -1)) {
          const p = src.replace(/\/$/, "");
          assert.ok(fs.existsSync(path.join(ROOT, p)), `COPY ${src}: missing in the repository`);
          assert.ok(
            allowed.some((a) => p === a || p.startsWith(`${a}/`)),
            `COPY ${src}: excluded by .dockerignore`,
          );
        }
      }
    }
    // every source directory the build compiles (tsconfig.build.json) is copied into the build stage
    const include = (
      JSON.parse(fs.readFileSync(path.join(ROOT, "tsconfig.build.json"), "utf8")) as { include: string[] }
    ).include;
    const built = df.stages
      .find((s) => s.name === "build")!
      .instructions.filter((i) => i.cmd === "COPY")
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1))
      .map((p) => p.replace(/\/$/, ""));
    for (const dir of include)
      assert.ok(built.includes(dir), `the build stage must COPY ${dir}/ (tsconfig.build.json compiles it)`);
    for (const never of ["node_modules", "dist", ".git", "test", "charts", ".env"])
      assert.ok(!allowed.includes(never), `${never} must stay out of the context`);
    // what the handlers image copies exists
    for (const i of handlersDf.stages
      .flatMap((s) => s.instructions)
      .filter((x) => x.cmd === "COPY" && !/--from=/.test(x.args))) {
      for (const src of i.args.split(/\s+/).slice(0, -1))
        assert.ok(fs.existsSync(path.join(HANDLERS, src)), `examples/handlers: COPY ${src}`);
    }
  });

  it("example handlers work as the worker calls them", async () => {
    const wc = spawnSync(process.execPath, [path.join(HANDLERS, "wordcount.js")], {
      input: JSON.stringify({ text: "one two  three" }),
      encoding: "utf8",
      env: { ...process.env, CONVEYOR_JOB_ID: "j1" },
    });
    assert.equal(wc.status, 0, wc.stderr);
    assert.deepEqual(JSON.parse(wc.stdout), { words: 3, job: "j1" });
    const bad = spawnSync(process.execPath, [path.join(HANDLERS, "wordcount.js")], {
      input: '{"nope":1}',
      encoding: "utf8",
    });
    assert.equal(bad.status, 65, "bad input: exit 65 (no retry)");

    const ctx = { signal: new AbortController().signal, log: { info() {}, warn() {} }, progress() {} };
    const job = (data: unknown) => ({
      id: "j",
      queue: "q",
      data,
      attempt: 1,
      maxAttempts: 3,
      executionId: "e",
      createdAt: Date.now(),
    });
    const resize = (await import(path.join(HANDLERS, "resize.js"))) as {
      default: (j: unknown, c: unknown) => Promise<unknown>;
    };
    assert.deepEqual(await resize.default(job({ url: "s3://b/cat.png", width: 320 }), ctx), {
      url: "s3://b/cat.png",
      width: 320,
      output: "s3://b/cat-w320.png",
    });
    await assert.rejects(resize.default(job({}), ctx), (e: { retryable?: boolean }) => e.retryable === false);
    const ocr = (await import(path.join(HANDLERS, "ocr.js"))) as {
      default: (j: unknown, c: unknown) => Promise<{ text: string }>;
    };
    const embed = (await import(path.join(HANDLERS, "embed.js"))) as {
      default: (j: unknown, c: unknown) => Promise<{ embedding: number[] }>;
    };
    const stage1 = await ocr.default(job({ document: "scan.pdf" }), ctx);
    const stage2 = await embed.default(job(stage1), ctx);
    assert.equal(stage2.embedding.length, 8);
  });
});
