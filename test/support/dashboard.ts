// The dashboard's test stack: a real Redis, PostgreSQL, `conveyor api` processes (normal and
// read-only) and a real worker that records jobs in PostgreSQL; plus a headless Debian
// Chromium driven by playwright-core (never a browser download).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";
import { connectRedis, type RedisClient } from "../../queue/index.ts";
import { freePort } from "./ports.ts";
import { PostgresServer } from "./postgres.ts";
import { startProcess, stopProcess, waitFor, type Started } from "./processes.ts";
import { RedisServer } from "./redis.ts";
import { CONVEYOR, NODE, RECORDING_HANDLER, REPO, startWorker, type WorkerProcess } from "./workers.ts";

export const CHROMIUM = "/usr/bin/chromium";

/** The UI as `conveyor api` serves it (dist/dashboard), built from the sources under test. */
export function buildDashboard(): void {
  execFileSync(
    join(REPO, "node_modules/.bin/vite"),
    ["build", "--config", "dashboard/vite.config.ts", "--logLevel", "warn"],
    { cwd: REPO, stdio: "inherit" },
  );
}

export interface ApiProcess extends Started {
  base: string;
  logFile: string;
}

export async function startApi(
  dir: string,
  name: string,
  env: Record<string, string>,
  args: string[] = [],
  /** A restart on the same address: the port the previous process had. */
  port?: number,
): Promise<ApiProcess> {
  port ??= await freePort();
  const base = `http://127.0.0.1:${port}`;
  const logFile = join(dir, `${name}.log`);
  const p = startProcess(NODE, [CONVEYOR, "api", "--port", String(port), "--host", "127.0.0.1", ...args], {
    logFile,
    env: { ...process.env, KUBECONFIG: "", ...env },
  });
  await waitFor(`${name} up`, async () => {
    if (p.child.exitCode !== null) throw new Error(`${name} exited with ${p.child.exitCode}`);
    return (await fetch(`${base}/healthz`).catch(() => null))?.ok;
  });
  return { ...p, base, logFile };
}

export class DashboardStack {
  dir!: string;
  redisServer!: RedisServer;
  pg!: PostgresServer;
  redis!: RedisClient;
  api!: ApiProcess;
  workers: WorkerProcess[] = [];
  readonly token = "dashboard-test-token";
  private extra: Started[] = [];

  /** One worker per queue; `next` names a queue's next stage (a pipeline). */
  static async start(opts: { queues: string[]; next?: Record<string, string> }): Promise<DashboardStack> {
    const s = new DashboardStack();
    s.dir = mkdtempSync(join(tmpdir(), "cvy-dash-"));
    s.redisServer = await RedisServer.start();
    s.pg = await PostgresServer.start();
    s.redis = connectRedis(s.redisServer.url);
    s.api = await startApi(s.dir, "api", s.env());
    for (const queue of opts.queues)
      s.workers.push(
        await startWorker({
          dir: s.dir,
          name: `w-${queue.replaceAll("/", "-")}`,
          env: {
            REDIS_URL: s.redisServer.url,
            DATABASE_URL: s.pg.url,
            CONVEYOR_QUEUE: queue,
            CONVEYOR_HANDLER: RECORDING_HANDLER,
            CONVEYOR_CONCURRENCY: "4",
            ...(opts.next?.[queue] ? { CONVEYOR_NEXT_QUEUE: opts.next[queue] } : {}),
          },
        }),
      );
    return s;
  }

  env(): Record<string, string> {
    return { REDIS_URL: this.redisServer.url, DATABASE_URL: this.pg.url, CONVEYOR_API_TOKEN: this.token };
  }

  /** Wait until the recorder has written a conveyor_jobs row matching `where` ($1… = `params`). */
  async recorded(where: string, params: unknown[]): Promise<void> {
    await waitFor(
      `records: ${where} ${params.join(", ")}`,
      async () =>
        (
          await this.pg.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM conveyor_jobs WHERE ${where}`,
            params,
          )
        )[0]!.n > 0,
      60_000,
      200,
    );
  }

  /** Another API process over the same data (read-only, an allow-list…), stopped with the stack. */
  async startApi(name: string, args: string[], env: Record<string, string> = {}): Promise<ApiProcess> {
    const p = await startApi(this.dir, name, { ...this.env(), ...env }, args);
    this.extra.push(p);
    return p;
  }

  async stop(): Promise<void> {
    for (const w of this.workers) await stopProcess(w, 3000);
    for (const p of this.extra) await stopProcess(p, 2000);
    if (this.api) await stopProcess(this.api, 2000);
    this.redis?.disconnect();
    await this.redisServer?.stop();
    await this.pg?.stop();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Headless Debian Chromium with a fresh profile (mkdtemp) of its own; close() removes the profile. */
export async function launchBrowser(): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), "cvy-chromium-"));
  // A persistent context is how playwright takes a --user-data-dir.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 900 },
    colorScheme: "light",
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
