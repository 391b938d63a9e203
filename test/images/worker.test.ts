// The built conveyor-worker image as a container (podman, host network, read-only root, /tmp a
// tmpfs, no capabilities): who it runs as, tini as PID 1, jobs from a real Redis through a
// mounted module handler and a command handler whose orphaned children tini reaps, and warm
// shutdown: SIGTERM with a job in flight lets the job finish and the container exits 0.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import {
  buildImages,
  containersUnavailable,
  podman,
  podmanSync,
  runContainer,
  waitRunning,
  WORKER_IMAGE,
  WORKER_PYTHON_IMAGE,
  type Container,
} from "../support/containers.ts";
import { freePort } from "../support/ports.ts";
import { waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { readExecutions, REPO } from "../support/workers.ts";

const skip = containersUnavailable();

/** `ls <dir>` inside the worker image, offline. */
const lsInWorkerImage = (dir: string) =>
  podmanSync("run", "--rm", "--network=none", "--pull=never", "--entrypoint", "ls", WORKER_IMAGE, dir);

describe("conveyor-worker image", { skip, timeout: 40 * 60_000 }, () => {
  let server: RedisServer;
  let redis: RedisClient;
  let producer: Producer;
  let admin: QueueAdmin;
  let dir: string;
  const containers: Container[] = [];
  const suffix = `${process.pid}`;

  before(async () => {
    await buildImages();
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    producer = new Producer(redis);
    admin = new QueueAdmin(redis);
    dir = mkdtempSync(join(tmpdir(), "cvy-image-worker-"));
    chmodSync(dir, 0o777); // the container's uid 65532 writes the execution log here
  });
  after(async () => {
    await Promise.all(containers.map((c) => c.stop(0)));
    redis?.disconnect();
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A worker container on `queue` with `handler`, ready (its /readyz answers 200). */
  async function worker(
    name: string,
    queue: string,
    handler: string,
    image = WORKER_IMAGE,
    env: Record<string, string> = {},
  ): Promise<Container & { port: number }> {
    const port = await freePort();
    const c = runContainer({
      image,
      name: `cvy-test-${name}-${suffix}`,
      env: {
        CONVEYOR_QUEUE: queue,
        CONVEYOR_HANDLER: handler,
        REDIS_URL: server.url,
        CONVEYOR_PORT: String(port),
        CONVEYOR_CONCURRENCY: "2",
        POD_NAME: name,
        EXEC_LOG: `/out/${queue}.ndjson`,
        ...env,
      },
      volumes: { [join(REPO, "test", "fixtures")]: "/handlers:ro", [dir]: "/out" },
      logFile: join(dir, `${name}.log`),
    });
    containers.push(c);
    await waitFor(
      `worker container ${name} ready`,
      async () => {
        if (c.child.exitCode !== null)
          throw new Error(`exited ${c.child.exitCode}: ${readFileSync(join(dir, `${name}.log`), "utf8")}`);
        return (await fetch(`http://127.0.0.1:${port}/readyz`)).ok;
      },
      180_000,
      200,
    );
    return Object.assign(c, { port });
  }

  const completed = (queue: string, ids: string[]) =>
    waitFor(
      `${ids.length} jobs of ${queue} completed`,
      async () => {
        const jobs = await Promise.all(ids.map((id) => admin.job(id, queue)));
        return jobs.every((j) => j?.state === "completed") && jobs;
      },
      120_000,
      200,
    );

  /** The container's processes: pid, command, state, parent pid (from /proc, no ps in the image). */
  async function processes(c: Container) {
    const out = await c.exec("sh", "-c", "cat /proc/[0-9]*/stat 2>/dev/null; true");
    return out
      .split("\n")
      .filter(Boolean)
      .map((line) => {
        const m = /^(\d+) \((.*)\) (\S) (\d+)/.exec(line)!;
        return { pid: Number(m[1]), comm: m[2]!, state: m[3]!, ppid: Number(m[4]) };
      });
  }

  test("conveyor-worker-python: a python: handler from a mounted module runs jobs in the image's Python", async () => {
    const q = "py-image";
    await worker("py", q, "python:py_handlers:work", WORKER_PYTHON_IMAGE, { PYTHONPATH: "/handlers" });
    const ids = await Promise.all(
      [1, 2, 3].map(async (n) => (await producer.enqueue(q, { mode: "ok", n })).id),
    );
    const jobs = await completed(q, ids);
    assert.deepEqual(
      jobs.map((j) => (JSON.parse(j!.result!) as { double: number }).double),
      [2, 4, 6],
    );
  });

  test("the image: uid/gid 65532, tini as PID 1, OCI labels, no Kubernetes client", async () => {
    const cfg = JSON.parse(await podman("image", "inspect", WORKER_IMAGE))[0] as {
      Config: { User: string; Entrypoint: string[]; Cmd: string[]; Labels: Record<string, string> };
      Size: number;
    };
    assert.equal(cfg.Config.User, "65532:65532");
    assert.deepEqual(cfg.Config.Entrypoint, ["/usr/bin/tini", "--", "/usr/local/bin/conveyor"]);
    assert.deepEqual(cfg.Config.Cmd, ["worker"]);
    const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string };
    assert.equal(cfg.Config.Labels["org.opencontainers.image.version"], pkg.version);
    const head = execFileSync("git", ["rev-parse", "HEAD"], { cwd: REPO, encoding: "utf8" }).trim();
    assert.match(cfg.Config.Labels["org.opencontainers.image.revision"]!, new RegExp(`^${head}(-dirty)?$`));
    assert.match(cfg.Config.Labels["org.opencontainers.image.source"]!, /^https:\/\//);
    // /app is the packed @conveyor-dev/conveyor npm package (the artifact `npx` installs), with
    // the packed library beside it; `conveyor --version` prints the package version
    const version = podmanSync("run", "--rm", "--network=none", "--pull=never", WORKER_IMAGE, "--version");
    assert.equal(version.status, 0, version.stderr);
    assert.equal(version.stdout.trim(), pkg.version);
    const manifests = podmanSync(
      "run",
      "--rm",
      "--network=none",
      "--pull=never",
      "--entrypoint",
      "cat",
      WORKER_IMAGE,
      "/app/package.json",
      "/app/node_modules/@conveyor-dev/queue/package.json",
    );
    assert.equal(manifests.status, 0, manifests.stderr);
    const [cli, library] = manifests.stdout
      .split(/(?<=^\})\n/m)
      .filter((t) => t.trim())
      .map((t) => JSON.parse(t) as { name: string; version: string; dependencies: Record<string, string> });
    assert.equal(cli!.name, "@conveyor-dev/conveyor");
    assert.equal(cli!.version, pkg.version);
    assert.equal(cli!.dependencies["@conveyor-dev/queue"], pkg.version);
    assert.equal(library!.name, "@conveyor-dev/queue");
    assert.equal(library!.version, pkg.version);
    // `conveyor operator` in the worker image: a clear message, not a stack trace
    for (const args of [["operator"], ["operator", "--help"]]) {
      const op = podmanSync("run", "--rm", "--network=none", "--pull=never", WORKER_IMAGE, ...args);
      assert.equal(op.status, 2, op.stderr);
      assert.match(op.stderr, /the operator is not part of this build/);
    }
    const ls = lsInWorkerImage("/app/node_modules");
    assert.equal(ls.status, 0, ls.stderr);
    assert.doesNotMatch(ls.stdout, /@kubernetes/);
    assert.match(ls.stdout, /ioredis/);
    // nor the operator's code (it no longer needs the Kubernetes client to load)
    const dist = lsInWorkerImage("/app/dist");
    assert.equal(dist.status, 0, dist.stderr);
    assert.match(dist.stdout, /^worker$/m);
    assert.doesNotMatch(dist.stdout, /^operator$/m);
  });

  test("module handler: jobs from Redis complete in a read-only container as uid 65532 under tini", async () => {
    const w = await worker("module", "img-module", "module:/handlers/recordingHandler.js");
    assert.equal((await w.exec("id", "-u")).trim(), "65532");
    assert.equal((await w.exec("id", "-g")).trim(), "65532");
    assert.equal(
      (await w.exec("sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline")).trim(),
      "/usr/bin/tini -- /usr/local/bin/conveyor worker",
    );
    await assert.rejects(w.exec("sh", "-c", "touch /app/x"), /Read-only file system/);
    await assert.rejects(w.exec("sh", "-c", "touch /x"), /Read-only file system/);
    await w.exec("sh", "-c", "touch /tmp/x && rm /tmp/x");

    const ids = Array.from({ length: 10 }, (_, i) => `m${i}`);
    for (const id of ids) await producer.enqueue("img-module", { i: Number(id.slice(1)) }, { id });
    const jobs = await completed("img-module", ids);
    assert.deepEqual(
      jobs.map((j) => JSON.parse(j!.result!)),
      ids.map((_, i) => ({ i })),
    );
    const execs = readExecutions(join(dir, "img-module.ndjson"));
    assert.deepEqual(execs.map((e) => e.id).sort(), [...ids].sort(), "each job ran once");
  });

  test("command handler: results from a child process; its orphaned children are reaped by tini", async () => {
    // The command leaves a background `sleep` behind: orphaned, it is re-parented to PID 1, which
    // must reap it when it exits (node as PID 1 would leave a zombie behind).
    const script = `cat >/dev/null; (sleep 6 </dev/null >/dev/null 2>&1 &); printf '{"job":"%s"}' "$CONVEYOR_JOB_ID"`;
    const w = await worker("command", "img-command", `command:${JSON.stringify(["sh", "-c", script])}`);
    const ids = ["c0", "c1", "c2", "c3"];
    for (const id of ids) await producer.enqueue("img-command", { id }, { id });
    const jobs = await completed("img-command", ids);
    assert.deepEqual(
      jobs.map((j) => JSON.parse(j!.result!)),
      ids.map((id) => ({ job: id })),
    );
    const orphans = (await processes(w)).filter((p) => p.comm === "sleep");
    assert.ok(orphans.length > 0, "the orphaned sleeps are still running (sleep 6)");
    assert.ok(
      orphans.every((p) => p.ppid === 1),
      `orphans belong to PID 1: ${JSON.stringify(orphans)}`,
    );
    await waitFor(
      "the orphans exited and were reaped",
      async () => {
        const ps = await processes(w);
        return !ps.some((p) => p.comm === "sleep" || p.state === "Z") && ps;
      },
      60_000,
      250,
    );
    const ps = await processes(w);
    assert.deepEqual(
      ps.filter((p) => p.state === "Z"),
      [],
      "no zombies",
    );
  });

  test("SIGTERM with a job in flight: the job finishes, the container exits 0", async () => {
    const w = await worker("drain", "img-drain", "module:/handlers/recordingHandler.js");
    await producer.enqueue("img-drain", { sleepMs: 4000, result: { slow: true } }, { id: "slow" });
    await waitFor(
      "the slow job started",
      async () => readExecutions(join(dir, "img-drain.ndjson")).length === 1,
      60_000,
      100,
    );
    await w.signal("SIGTERM");
    await waitFor(
      "readiness turned false",
      async () => {
        try {
          return !(await fetch(`http://127.0.0.1:${w.port}/readyz`)).ok;
        } catch {
          return true; // already gone
        }
      },
      30_000,
      100,
    );
    assert.equal(await w.exited, 0, readFileSync(join(dir, "drain.log"), "utf8"));
    const job = await admin.job("slow", "img-drain");
    assert.equal(job?.state, "completed");
    assert.deepEqual(JSON.parse(job!.result!), { slow: true });
    assert.equal(readExecutions(join(dir, "img-drain.ndjson")).length, 1, "ran once");
  });
});
