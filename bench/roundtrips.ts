// Requests per job: what each worker actually sends Redis, counted with MONITOR on a short run.
// MONITOR prints every command with its client's address, and commands run inside scripts
// as coming from `lua`; a MULTI … EXEC block counts as one request. Without client-side
// pipelining (neither worker pipelines on this path) a request is one round trip.
// Script calls are named by their SHA1 (Conveyor's scripts from queue/scripts/, BullMQ's from
// its package). MONITOR slows Redis down, so these runs give counts, never speed.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import { scriptSource } from "../queue/index.ts";
import type { ScriptName } from "../queue/scripts.ts";
import { startProcess, stopProcess } from "../test/support/processes.ts";
import { flush } from "./lib/redis.ts";
import type { SystemName } from "./lib/systems.ts";
import { noopJobs, watchDrain, type BenchContext } from "./throughput.ts";
import { REPO, round, sleep } from "./lib/util.ts";

const sha1 = (s: string) => createHash("sha1").update(s).digest("hex");

let shaNames: Map<string, string> | undefined;

/** SHA1 → script name for both systems' scripts. */
export async function scriptNames(extra: Record<string, string> = {}): Promise<Map<string, string>> {
  if (shaNames) return shaNames;
  const m = new Map<string, string>();
  const conveyorScripts = readdirSync(join(REPO, "queue/scripts")).filter(
    (f) => f.endsWith(".lua") && !f.startsWith("_"),
  );
  for (const file of conveyorScripts) {
    const name = file.slice(0, -4) as ScriptName;
    m.set(sha1(scriptSource(name)), `conveyor:${name}`);
  }
  const dir = join(REPO, "node_modules/bullmq/dist/esm/scripts");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".js") && f !== "index.js")) {
    const mod = (await import(pathToFileURL(join(dir, file)).href)) as Record<
      string,
      { name?: string; content?: string }
    >;
    for (const v of Object.values(mod)) if (v?.content && v.name) m.set(sha1(v.content), `bullmq:${v.name}`);
  }
  for (const [name, lua] of Object.entries(extra)) m.set(sha1(lua), name);
  shaNames = m;
  return m;
}

export interface RoundTrips {
  system: SystemName;
  jobs: number;
  concurrency: number;
  /** Requests per job from the worker process, all its connections. */
  requestsPerJob: number;
  /** Per connection name (Conveyor names its connections; BullMQ's are `unnamed`). */
  byConnection: Record<string, number>;
  /** Per command, script calls by script name. */
  byRequest: Record<string, number>;
  /** Commands run inside scripts, per job. */
  scriptedCommandsPerJob: number;
}

interface ClientInfo {
  addr: string;
  name: string;
}

async function clients(ctx: BenchContext): Promise<ClientInfo[]> {
  const text = (await ctx.driver.client("LIST")) as string;
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => ({
      addr: /addr=(\S+)/.exec(line)?.[1] ?? "",
      name: /name=(\S*)/.exec(line)?.[1] ?? "",
    }));
}

/** Parse MONITOR output: top-level requests by client address, and commands run by scripts. */
export async function parseMonitor(
  file: string,
  names: Map<string, string>,
): Promise<{ requests: Map<string, Map<string, number>>; scripted: number }> {
  const requests = new Map<string, Map<string, number>>();
  const inMulti = new Set<string>();
  let scripted = 0;
  const rl = createInterface({ input: createReadStream(file) });
  for await (const line of rl) {
    const m = /^\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]*)"(?: "([^"]*)")?/.exec(line);
    if (!m) continue;
    const [, source, rawCmd, arg1] = m as unknown as [string, string, string, string | undefined];
    if (source === "lua") {
      scripted++;
      continue;
    }
    const cmd = rawCmd.toLowerCase();
    if (cmd === "multi") inMulti.add(source);
    if (inMulti.has(source) && cmd !== "exec" && cmd !== "discard") continue;
    let label = cmd;
    if (cmd === "exec" || cmd === "discard") {
      inMulti.delete(source);
      label = "multi/exec";
    }
    if (cmd === "evalsha") label = names.get(arg1 ?? "") ?? `evalsha:${(arg1 ?? "").slice(0, 8)}`;
    if (cmd === "eval") label = names.get(sha1(arg1 ?? "")) ?? "eval";
    const per = requests.get(source) ?? new Map<string, number>();
    per.set(label, (per.get(label) ?? 0) + 1);
    requests.set(source, per);
  }
  return { requests, scripted };
}

export async function countRoundTrips(
  ctx: BenchContext,
  name: SystemName,
  opts: { jobs: number; concurrency: number },
): Promise<RoundTrips> {
  const sys = ctx.systems[name];
  const names = await scriptNames();
  await flush(ctx.driver);
  await sys.enqueueBulk(noopJobs(opts.jobs));
  const file = join(ctx.tmp, `monitor-${name}-c${opts.concurrency}.txt`);
  const port = new URL(ctx.url).port;
  const monitor = startProcess("redis-cli", ["-p", port, "monitor"], { logFile: file });
  await sleep(300);
  const before = new Set((await clients(ctx)).map((c) => c.addr));
  const worker = await sys.startWorker({
    concurrency: opts.concurrency,
    logFile: join(ctx.tmp, `${name}-monitor-c${opts.concurrency}.log`),
  });
  let workerClients: ClientInfo[] = [];
  try {
    await watchDrain(sys, opts.jobs, worker, 120_000 + opts.jobs * 20);
    workerClients = (await clients(ctx)).filter((c) => !before.has(c.addr));
    // MONITOR output lags behind; wait until a marker sent now has come through.
    const marker = `bench-monitor-end-${Date.now()}`;
    await ctx.driver.echo(marker);
    const deadline = Date.now() + 120_000;
    while (!readFileSync(file, "utf8").includes(marker)) {
      if (Date.now() > deadline) throw new Error("MONITOR output did not catch up within 120 s");
      await sleep(100);
    }
  } finally {
    await stopProcess(monitor);
    await worker.stop();
  }
  const { requests, scripted } = await parseMonitor(file, names);
  const byConnection: Record<string, number> = {};
  const byRequest: Record<string, number> = {};
  let total = 0;
  for (const c of workerClients) {
    const per = requests.get(c.addr);
    if (!per) continue;
    const label = c.name ? c.name.replace(/:.*$/, "") : "unnamed";
    for (const [req, n] of per) {
      total += n;
      byConnection[label] = (byConnection[label] ?? 0) + n;
      byRequest[req] = (byRequest[req] ?? 0) + n;
    }
  }
  const norm = (o: Record<string, number>) =>
    Object.fromEntries(
      Object.entries(o)
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => [k, round(v / opts.jobs, 3)]),
    );
  return {
    system: name,
    jobs: opts.jobs,
    concurrency: opts.concurrency,
    requestsPerJob: round(total / opts.jobs, 3),
    byConnection: norm(byConnection),
    byRequest: norm(byRequest),
    scriptedCommandsPerJob: round(scripted / opts.jobs, 2),
  };
}
