// Real `conveyor worker` processes for tests, each with its own health port and log file.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "./ports.ts";
import { startProcess, waitFor, type Started } from "./processes.ts";
import { Consumer, type RedisClient } from "../../queue/index.ts";

export const REPO = new URL("../../", import.meta.url).pathname;
export const NODE = join(REPO, "node_modules/.bin/node");
export const CONVEYOR = join(REPO, "bin/conveyor.js");
export const RECORDING_HANDLER = `module:${join(REPO, "test/fixtures/recordingHandler.js")}`;

export interface WorkerProcess extends Started {
  port: number;
  logFile: string;
  logs(): string;
  metrics(): Promise<string>;
  signal(sig: NodeJS.Signals): void;
}

/** A built checkout of a Conveyor release: its pinned Node and its `conveyor` command. */
export interface Release {
  dir: string;
  node: string;
  conveyor: string;
}

export const THIS_RELEASE: Release = { dir: REPO, node: NODE, conveyor: CONVEYOR };

export function releaseAt(dir: string): Release {
  return { dir, node: join(dir, "node_modules/.bin/node"), conveyor: join(dir, "bin/conveyor.js") };
}

export async function startWorker(opts: {
  dir: string;
  name: string;
  env: Record<string, string>;
  waitReady?: boolean;
  /** Which release's worker runs (default this one). */
  release?: Release;
}): Promise<WorkerProcess> {
  const port = await freePort();
  const logFile = join(opts.dir, `${opts.name}.log`);
  const release = opts.release ?? THIS_RELEASE;
  const started = startProcess(release.node, [release.conveyor, "worker"], {
    logFile,
    env: {
      ...process.env,
      CONVEYOR_PORT: String(port),
      CONVEYOR_WORKER_ID: opts.name,
      POD_NAME: opts.name,
      ...opts.env,
    },
  });
  const w: WorkerProcess = {
    ...started,
    port,
    logFile,
    logs: () => {
      try {
        return readFileSync(logFile, "utf8");
      } catch {
        return "";
      }
    },
    metrics: async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text(),
    signal: (sig) => {
      try {
        process.kill(started.child.pid!, sig);
      } catch {
        // gone
      }
    },
  };
  if (opts.waitReady === false) return w;
  await waitFor(
    `worker ${opts.name} ready`,
    async () => {
      if (started.child.exitCode !== null) throw new Error(`worker ${opts.name} exited: ${w.logs()}`);
      return (await fetch(`http://127.0.0.1:${port}/readyz`)).ok;
    },
    60_000,
    100,
  );
  return w;
}

/** Executions recorded by the recording handler, one JSON object a line. */
export interface Execution {
  q: string;
  id: string;
  exec: string;
  attempt: number;
  pid: number;
  t: number;
}

export function readExecutions(file: string): Execution[] {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  const out: Execution[] = [];
  for (const line of text.split("\n")) {
    if (!line) continue;
    try {
      out.push(JSON.parse(line) as Execution);
    } catch {
      // a line cut short by a SIGKILL
    }
  }
  return out;
}

export function countBy<T>(items: T[], key: (t: T) => string): Map<string, number> {
  const m = new Map<string, number>();
  for (const it of items) m.set(key(it), (m.get(key(it)) ?? 0) + 1);
  return m;
}

/** The value of a counter in Prometheus text, summed over label sets matching `labels`. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const ls = Object.fromEntries([...(m[3] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => ls[k] === v)) total += Number(m[4]);
  }
  return total;
}

/** Completes every ready job of `queue` at once, as a worker with unlimited slots would (tests that scale on a backlog). */
export async function drainQueue(redis: RedisClient, queue: string): Promise<void> {
  const c = new Consumer(redis, queue, { workerId: "test-drainer", leaseMs: 60_000, retentionSeconds: 0 });
  for (;;) {
    const { jobs } = await c.claim(200);
    if (jobs.length === 0) return;
    for (const j of jobs) await c.complete(j, null);
  }
}
