// `npm run chaos -- --jobs N --seconds S [--seed X] [--json]` — a multi-stage pipeline of real
// worker processes under a seeded fault injector, then an audit of every job and every execution.
// See docs/chaos.md.
//
// Redis (AOF, appendfsync always) and PostgreSQL are started here; every worker records its
// pipeline's job history (DATABASE_URL). Stages chaos/a → chaos/b → chaos/c have --workers
// processes each. While jobs flow, the injector (schedule from --seed, printed first) sends
// workers SIGTERM (and starts a new pod beside them), SIGKILL (the "container" restarts with the
// same worker id), SIGSTOP past the lease then SIGCONT, restarts Redis (SIGKILL or SIGTERM, same
// port and data dir) and stops/restarts PostgreSQL. Every fault is logged with its pid and time.
// The recording handler logs every execution to a file of its own. Afterwards: which jobs were
// lost, which ran twice at one stage and why (chaos/analyze.ts), whether late completions were
// fenced off, whether PostgreSQL holds every job and every execution. With --flows, flows run
// beside the plain jobs and no dependent may start before its parents completed. With --upgrade,
// the workers are of two releases (this one and the previous one, scripts/previous-release.sh):
// an upgrade fault replaces a worker by one of the other release with warm shutdown, as a rolling
// `helm upgrade` or rollback does, and must re-run nothing.
//
// The last stdout line is one JSON object (with --json); the exit code is 0 when the run passed:
// nothing lost, no re-run after a SIGTERM, no record missing, every re-run explained by a SIGKILL
// or SIGSTOP of the worker that ran it.
import { randomInt } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import {
  connectRedis,
  parseDurability,
  parseDuration,
  PipelineKeys,
  Producer,
  QueueAdmin,
  QueueKeys,
  setGroupLimit,
  type Durability,
  type RedisClient,
} from "../queue/index.ts";
import { PostgresServer } from "../test/support/postgres.ts";
import { stopProcess } from "../test/support/processes.ts";
import { RedisClusterServer, RedisServer } from "../test/support/redis.ts";
import { previousRelease } from "../test/support/releases.ts";
import { RedisSentinelSet } from "../test/support/sentinel.ts";
import {
  readExecutions,
  RECORDING_HANDLER,
  startWorker,
  type Release,
  type WorkerProcess,
} from "../test/support/workers.ts";
import {
  attribute,
  auditGroupLimits,
  auditRestartReruns,
  executionEnds,
  readExecutionEnds,
  firstStarts,
  flowOrderViolations,
  sequenceInversions,
  type FlowEdge,
  type EndOfExecution,
  type FaultRecord,
  type GroupPeak,
  leaseKey,
} from "./analyze.ts";
import {
  FAILOVER_FAULT_KINDS,
  FAULT_KINDS,
  faultSchedule,
  flowPlans,
  GROUP_CONCURRENCY,
  jobGroup,
  jobPlans,
  SEQUENCE_GROUP,
  withUpgrade,
  type PlannedFault,
  type ReleaseSide,
} from "./plan.ts";

export interface ChaosOptions {
  jobs: number;
  seconds: number;
  seed: number;
  workersPerStage: number;
  concurrency: number;
  leaseMs: number;
  stages: number;
  meanGapMs: number;
  maxStalls: number;
  settleTimeoutMs: number;
  keep: boolean;
  dir?: string;
  /** single: one redis-server (AOF), restarted; sentinel / cluster: a primary killed and its replica promoted. */
  redis: RedisTopology;
  durability: Durability;
  /** Groups of the grouped stage (0: no job has a group): plan.ts jobGroup. */
  groups: number;
  /** Flows enqueued beside the plain jobs (plan.ts flowPlans): a root, 2–4 middles, a sink. */
  flows: number;
  /** Workers of the previous release beside this one's, and upgrade faults between the two. */
  upgrade: boolean;
}

export type RedisTopology = "single" | "sentinel" | "cluster";

const PIPELINE = "chaos";
const STAGE_NAMES = "abcdefgh";
/** How long a SIGTERMed worker may take to exit: its 25 s drain deadline (the default) and a margin. */
const SIGTERM_EXIT_WAIT_MS = 40_000;

const USAGE = `usage: npm run chaos -- [options]
  --jobs N            jobs to push through the pipeline (default 2000)
  --seconds S         length of the fault window; jobs are enqueued over its first 60% (default 60)
  --seed X            fault schedule and job shapes (default: random; printed at start)
  --json              last stdout line: the report as one JSON object
  --workers N         worker processes per stage (default 3)
  --concurrency N     job slots per worker (default 4)
  --lease D           worker lease (default 2s)
  --stages N          pipeline stages, 2..8 (default 3: chaos/a → chaos/b → chaos/c)
  --fault-every D     mean time between faults (default 3s)
  --max-stalls N      lease expiries before a job is dead-lettered (default 2, the worker's default)
  --settle-timeout D  how long to wait for the pipeline and the records to drain (default 5m)
  --keep              keep the run directory (logs, execution logs, fault log); kept anyway on failure
  --dir PATH          run directory (default: a new one under $TMPDIR)
  --redis T           single (one redis-server, restarted: default) | sentinel (1 primary, 1 replica,
                      3 sentinels) | cluster (3 primaries + 3 replicas): failover faults instead of restarts
  --durability M      primary (default) | replicated: producer and workers wait for a replica (WAIT)
  --groups N          half the jobs in N groups (0 = none, default): every 20th in a sequence
                      (concurrency 1), the rest at most ${GROUP_CONCURRENCY} at once per group; the audit checks both
  --flows N           also enqueue N flows (a root, 2–4 middles waiting for it, a sink waiting for them
                      all; default 0): the audit checks no dependent started before its parents completed
  --upgrade           workers of two releases: the first of each stage starts on the previous release
                      (make previous-release), and upgrade faults replace a worker by one of the other
                      release (previous → this, then this → previous, ...) with warm shutdown. With
                      --flows the last stage stays on this release (the previous one does not release
                      a flow's dependents: docs/install.md, "Upgrading")`;

export function parseChaosArgs(argv: string[]): ChaosOptions & { json: boolean } {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      jobs: { type: "string" },
      seconds: { type: "string" },
      seed: { type: "string" },
      json: { type: "boolean" },
      workers: { type: "string" },
      concurrency: { type: "string" },
      lease: { type: "string" },
      stages: { type: "string" },
      "fault-every": { type: "string" },
      "max-stalls": { type: "string" },
      "settle-timeout": { type: "string" },
      keep: { type: "boolean" },
      dir: { type: "string" },
      redis: { type: "string" },
      durability: { type: "string" },
      groups: { type: "string" },
      flows: { type: "string" },
      upgrade: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const int = (name: string, v: string | undefined, def: number, min: number, max: number) => {
    if (v === undefined) return def;
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max)
      throw new Error(`--${name}: expected a whole number ${min}..${max}, got ${JSON.stringify(v)}`);
    return Number(v);
  };
  return {
    jobs: int("jobs", values.jobs, 2000, 1, 10_000_000),
    seconds: int("seconds", values.seconds, 60, 5, 7 * 24 * 3600),
    seed: int("seed", values.seed, randomInt(1, 2 ** 31 - 1), 0, 2 ** 32 - 1),
    json: values.json ?? false,
    workersPerStage: int("workers", values.workers, 3, 1, 64),
    concurrency: int("concurrency", values.concurrency, 4, 1, 1000),
    leaseMs: parseDuration(values.lease ?? "2s", "--lease"),
    stages: int("stages", values.stages, 3, 2, STAGE_NAMES.length),
    meanGapMs: parseDuration(values["fault-every"] ?? "3s", "--fault-every"),
    maxStalls: int("max-stalls", values["max-stalls"], 2, 0, 1000),
    settleTimeoutMs: parseDuration(values["settle-timeout"] ?? "5m", "--settle-timeout"),
    keep: values.keep ?? false,
    dir: values.dir,
    redis: topology(values.redis ?? "single"),
    groups: int("groups", values.groups, 0, 0, 1000),
    flows: int("flows", values.flows, 0, 0, 1_000_000),
    upgrade: values.upgrade ?? false,
    durability: (() => {
      try {
        return parseDurability(values.durability ?? "primary");
      } catch (err) {
        throw new Error(`--durability: ${(err as Error).message}`);
      }
    })(),
  };
}

function topology(v: string): RedisTopology {
  if (v === "single" || v === "sentinel" || v === "cluster") return v;
  throw new Error(`--redis: expected single, sentinel or cluster, got ${JSON.stringify(v)}`);
}

export interface ChaosReport {
  redis: RedisTopology;
  durability: Durability;
  seed: number;
  seconds: number;
  jobs: number;
  enqueued: number;
  completed: number;
  lost: number;
  dead_lettered: number;
  dead_reasons: Record<string, number>;
  executions: number;
  retries: number;
  unplanned_retries: number;
  duplicates: number;
  duplicates_after_sigterm: number;
  /** Re-runs after a worker was replaced by one of the other release (a warm shutdown: a failure). */
  duplicates_after_upgrade: number;
  duplicates_after_sigkill: number;
  duplicates_after_sigstop: number;
  duplicates_after_redis_restart: number;
  /** Of those, re-runs whose lease ran out while Redis was down and whose late result was refused. */
  restart_reruns_lapsed_and_fenced: number;
  /** Each Redis restart's outage, ms from going down to answering again. */
  redis_outages_ms: number[];
  duplicates_after_failover: number;
  duplicates_other: number;
  /** Failover runs: acknowledged jobs the failovers lost (a failure with durability "replicated"). */
  lost_in_failover: number;
  /** Failover runs: executions whose claim record a failover lost with the claim (the job ran again). */
  records_lost_in_failover: number;
  fenced_late_completions: number;
  late_results_discarded: number;
  stalled: number;
  handed_back: number;
  records_missing_in_postgres: number;
  records_inconsistent: number;
  /** Grouped runs: groups, and per stage and limited group the most executions that ran at once. */
  groups: number;
  group_peaks: GroupPeak[];
  group_limit_breaches: number;
  /** Executions counted only until a SIGKILL or SIGSTOP of their worker (their lease lapsed). */
  group_executions_cut: number;
  /** Sequence jobs that started at the first stage before one enqueued ahead of them. */
  sequence_inversions: number;
  /** Flows asked for, enqueued, and their jobs (counted in completed, dead_lettered and lost too). */
  flows: number;
  flows_enqueued: number;
  flow_jobs: number;
  /** Flow jobs cancelled because a parent was dead-lettered or cancelled (the `fail` policy). */
  flow_jobs_cancelled: number;
  /** Parent → dependent edges whose dependent ran; of those, dependents started before that parent completed. */
  flow_edges_checked: number;
  flow_dependents_early: number;
  faults: Record<string, number>;
  faults_skipped: number;
  workers_started: number;
  sigterm_exits_nonzero: number;
  /** Upgrade runs: workers replaced by one of this release, by one of the previous release (a rollback). */
  upgrades_to_this: number;
  upgrades_to_previous: number;
  /** Upgrade runs: executions run by workers of each release. */
  executions_by_release: Record<ReleaseSide, number>;
  elapsed_seconds: number;
  pass: boolean;
  failures: string[];
  duplicate_examples: unknown[];
  dir?: string;
}

interface WorkerSlot {
  name: string;
  stage: number;
  state: "starting" | "up" | "stopped" | "down";
  current?: Proc;
  pods: number;
  /** The release its pods run; an upgrade fault switches it. */
  release: ReleaseSide;
}

interface Proc {
  file: string;
  workerId: string;
  slot: string;
  w: WorkerProcess;
  pid: number;
  exit?: number | string;
  fate?: "sigterm" | "upgrade" | "sigkill" | "final";
  release: ReleaseSide;
}

export async function runChaos(o: ChaosOptions, say: (line: string) => void): Promise<ChaosReport> {
  const started = Date.now();
  const dir = o.dir ?? mkdtempSync(join(tmpdir(), "cvy-chaos-"));
  mkdirSync(join(dir, "exec"), { recursive: true });
  mkdirSync(join(dir, "ends"), { recursive: true });
  mkdirSync(join(dir, "logs"), { recursive: true });
  mkdirSync(join(dir, "redis"), { recursive: true });
  const queues = Array.from({ length: o.stages }, (_, i) => `${PIPELINE}/${STAGE_NAMES[i]}`);
  const last = queues[queues.length - 1]!;
  const plan = jobPlans(o.seed, o.jobs, o.stages);
  const flowPlan = flowPlans(o.seed, o.flows, o.stages);
  /** Each enqueued flow's jobs (their ids, from enqueueFlow) and edges. */
  const flowJobs: { id: string; failsAt: number; parents: string[] }[] = [];
  const flowEdges: FlowEdge[] = [];
  let flowsEnqueued = 0;
  const windowMs = o.seconds * 1000;
  const failingOver = o.redis !== "single";
  const kinds = ((k) => (o.upgrade ? withUpgrade(k) : k))(failingOver ? FAILOVER_FAULT_KINDS : FAULT_KINDS);
  const schedule = faultSchedule(o.seed, { windowMs, meanGapMs: o.meanGapMs, leaseMs: o.leaseMs, kinds });
  const previous: Release | undefined = o.upgrade ? previousRelease() : undefined;
  const planned = countBy(schedule.map((f) => f.kind));
  say(
    `chaos: ${o.jobs} jobs${o.flows ? ` and ${o.flows} flows` : ""} through ${queues.join(" → ")}, ${o.workersPerStage} workers per stage × ${o.concurrency} slots, lease ${o.leaseMs}ms, Redis ${o.redis}, durability ${o.durability}; ${schedule.length} faults planned in ${o.seconds}s (${[...planned].map(([k, v]) => `${k} ${v}`).join(", ")}); run directory ${dir}`,
  );

  const topo = await startTopology(o.redis, join(dir, "redis")).catch(async (err: Error) => {
    throw new Error(`cannot start redis-server: ${err.message}`);
  });
  const redisServer = topo.single;
  const pg = await PostgresServer.start();
  const databaseUrl = await pg.createDatabase("chaos");
  const redis = connectRedis(topo.url, { name: "chaos-runner" });
  const producer = new Producer(redis, { durability: o.durability });
  const admin = new QueueAdmin(redis);
  const faults: FaultRecord[] = [];
  const procs: Proc[] = [];
  const slots: WorkerSlot[] = [];
  /** A slot whose workers may run the previous release: with flows, not the last stage's. */
  const mayRunPrevious = (stage: number) => o.upgrade && (o.flows === 0 || stage < o.stages - 1);
  for (let s = 0; s < o.stages; s++)
    for (let i = 0; i < o.workersPerStage; i++)
      slots.push({
        name: `${STAGE_NAMES[s]}${i}`,
        stage: s,
        state: "down",
        pods: 0,
        release: i === 0 && mayRunPrevious(s) ? "previous" : "this",
      });
  let stopping = false;
  const background = new Set<Promise<unknown>>();
  const track = <T>(p: Promise<T>) => {
    background.add(p);
    void p.finally(() => background.delete(p)).catch(() => {});
    return p;
  };

  async function launch(slot: WorkerSlot, workerId: string): Promise<void> {
    slot.state = "starting";
    for (let tries = 1; ; tries++) {
      const file = `${workerId}.${procs.filter((p) => p.workerId === workerId).length + tries}`;
      try {
        const env: Record<string, string> = {
          REDIS_URL: topo.url,
          CONVEYOR_DURABILITY: o.durability,
          DATABASE_URL: databaseUrl,
          CONVEYOR_QUEUE: queues[slot.stage]!,
          CONVEYOR_HANDLER: RECORDING_HANDLER,
          EXEC_LOG: join(dir, "exec", `${file}.jsonl`),
          EXEC_END_LOG: join(dir, "ends", `${file}.jsonl`),
          CONVEYOR_CONCURRENCY: String(o.concurrency),
          CONVEYOR_LEASE: `${o.leaseMs}ms`,
          CONVEYOR_MAX_STALLS: String(o.maxStalls),
          CONVEYOR_BACKOFF_BASE: "100ms",
          CONVEYOR_BACKOFF_MAX: "1s",
          CONVEYOR_WORKER_ID: workerId,
          POD_NAME: workerId,
          LOG_LEVEL: "info",
        };
        if (slot.stage < o.stages - 1) env.CONVEYOR_NEXT_QUEUE = queues[slot.stage + 1]!;
        const release = slot.release;
        const w = await startWorker({
          dir: join(dir, "logs"),
          name: file,
          env,
          waitReady: false,
          ...(release === "previous" ? { release: previous! } : {}),
        });
        const proc: Proc = { file, workerId, slot: slot.name, w, pid: w.child.pid!, release };
        procs.push(proc);
        void w.exited.then((code) => (proc.exit = code));
        slot.current = proc;
        await waitReady(w);
        if (slot.current === proc && slot.state === "starting") slot.state = "up";
        return;
      } catch (err) {
        say(`chaos: worker ${workerId} did not start (${(err as Error).message.split("\n")[0]}); retrying`);
        if (stopping || tries >= 5) {
          slot.state = "down";
          return;
        }
        await sleep(1000);
      }
    }
  }

  // 0. group limits on every stage (a job keeps its group from stage to stage)
  const groupOfJob = new Map(plan.map((j, i) => [j.id, jobGroup(i, o.groups)] as const));
  const limitOf = (_q: string, g: string) => (g === SEQUENCE_GROUP ? 1 : GROUP_CONCURRENCY);
  if (o.groups > 0)
    for (const q of queues) {
      await setGroupLimit(redis, q, undefined, { concurrency: GROUP_CONCURRENCY });
      await setGroupLimit(redis, q, SEQUENCE_GROUP, { concurrency: 1 });
    }

  // 1. workers (their recorders switch the outbox on before any job is enqueued)
  await Promise.all(slots.map((s) => launch(s, `${s.name}-${++s.pods}`)));
  const down = slots.filter((s) => s.state !== "up");
  if (down.length > 0)
    throw new Error(
      `workers did not start: ${down.map((s) => s.name).join(", ")} (logs in ${join(dir, "logs")})`,
    );
  say(
    `chaos: seed ${o.seed}: ${slots.length} workers up after ${((Date.now() - started) / 1000).toFixed(1)}s; go`,
  );

  // 2. the producer: every job over the first 60% of the window, retried through outages (ids make it idempotent)
  const t0 = Date.now();
  let enqueued = 0;
  const produceMs = windowMs * 0.6;
  const producing = track(
    (async () => {
      const batch = Math.max(1, Math.ceil(o.jobs / Math.max(1, produceMs / 200)));
      for (let i = 0; i < plan.length; i += batch) {
        await sleepUntil(t0 + (produceMs * i) / plan.length);
        const chunk = plan.slice(i, i + batch).map((j) => {
          const group = groupOfJob.get(j.id);
          return { id: j.id, data: j.data, attempts: 3, ...(group ? { group } : {}) };
        });
        for (let attempt = 1; ; attempt++) {
          try {
            await producer.enqueueMany(queues[0]!, chunk);
            enqueued += chunk.length;
            break;
          } catch (err) {
            if (attempt % 20 === 1) say(`chaos: enqueue failed (${(err as Error).message}); retrying`);
            await sleep(200);
          }
        }
      }
    })(),
  );

  // Flows, spread over the same 60 %. A retry after a lost reply may enqueue a flow twice: only
  // the acknowledged one is audited (the other runs beside it, unwatched).
  const producingFlows = track(
    (async () => {
      for (const [i, f] of flowPlan.entries()) {
        await sleepUntil(t0 + (produceMs * i) / flowPlan.length);
        const jobs = f.map((j) => ({
          key: j.key,
          queue: queues[0]!,
          data: j.data,
          attempts: 3,
          ...(j.parents.length ? { parents: j.parents } : {}),
        }));
        for (let attempt = 1; ; attempt++) {
          try {
            const { ids } = await producer.enqueueFlow(PIPELINE, jobs);
            for (const j of f) {
              flowJobs.push({ id: ids[j.key]!, failsAt: j.failsAt, parents: j.parents.map((p) => ids[p]!) });
              for (const p of j.parents) flowEdges.push({ parent: ids[p]!, child: ids[j.key]! });
            }
            flowsEnqueued++;
            break;
          } catch (err) {
            if (attempt % 20 === 1) say(`chaos: enqueueFlow failed (${(err as Error).message}); retrying`);
            await sleep(200);
          }
        }
      }
    })(),
  );

  // 3. the fault injector
  const faultLog = join(dir, "faults.jsonl");
  const note = (f: FaultRecord) => writeFileSync(faultLog, `${JSON.stringify(f)}\n`, { flag: "a" });
  let skipped = 0;
  const pick = (f: PlannedFault, fits: (s: WorkerSlot) => boolean = () => true): WorkerSlot | undefined => {
    for (let k = 0; k < slots.length; k++) {
      const s = slots[(f.slot + k) % slots.length]!;
      if (s.state === "up" && s.current && s.current.exit === undefined && fits(s)) return s;
    }
    return undefined;
  };
  /** An upgrade's slot: one on the other release than f.to; failing that, any that may switch. */
  const pickForUpgrade = (f: PlannedFault): WorkerSlot | undefined => {
    const switchable = (s: WorkerSlot) => s.release === "previous" || mayRunPrevious(s.stage);
    return pick(f, (s) => s.release !== f.to && switchable(s)) ?? pick(f, switchable);
  };
  const upgradesTo = { this: 0, previous: 0 };
  async function inject(f: PlannedFault): Promise<void> {
    const rec: FaultRecord = { n: f.n, kind: f.kind, at: 0 };
    switch (f.kind) {
      case "upgrade": {
        const slot = pickForUpgrade(f);
        if (!slot) {
          skipped++;
          return;
        }
        const p = slot.current!;
        const to: ReleaseSide = slot.release === "this" ? "previous" : "this";
        Object.assign(rec, {
          slot: slot.name,
          worker: p.workerId,
          pid: p.pid,
          at: Date.now(),
          detail: `${slot.release} → ${to}`,
        });
        // a rolling update to the other release: the old pod drains while the new one starts
        p.fate = "upgrade";
        p.w.signal("SIGTERM");
        note(rec);
        slot.release = to;
        upgradesTo[to]++;
        track(launch(slot, `${slot.name}-${++slot.pods}`));
        break;
      }
      case "sigterm":
      case "sigkill":
      case "sigstop": {
        const slot = pick(f);
        if (!slot) {
          skipped++;
          return;
        }
        const p = slot.current!;
        Object.assign(rec, { slot: slot.name, worker: p.workerId, pid: p.pid, at: Date.now() });
        if (f.kind === "sigterm") {
          p.fate = "sigterm";
          p.w.signal("SIGTERM");
          note(rec);
          // a rolling update: the old pod drains while a new one (a new worker id) starts
          track(launch(slot, `${slot.name}-${++slot.pods}`));
        } else if (f.kind === "sigkill") {
          p.fate = "sigkill";
          p.w.signal("SIGKILL");
          slot.state = "down";
          note(rec);
          // the container restarts in the same pod: same worker id (and recorder consumer)
          track(
            sleep(f.durationMs).then(() => {
              rec.end = Date.now();
              return launch(slot, p.workerId);
            }),
          );
        } else {
          p.w.signal("SIGSTOP");
          slot.state = "stopped";
          note(rec);
          track(
            sleep(f.durationMs).then(() => {
              p.w.signal("SIGCONT");
              rec.end = Date.now();
              note(rec);
              if (slot.current === p && slot.state === "stopped") slot.state = "up";
            }),
          );
        }
        break;
      }
      case "failover":
        redisChain = track(
          redisChain
            .catch(() => {})
            .then(async () => {
              rec.at = Date.now();
              note(rec);
              const { killed, promoted } = await topo.failover!();
              // The failover ends when the replica answers as primary; the killed node comes back
              // as its replica after f.durationMs (until then "replicated" writes cannot succeed).
              rec.end = Date.now();
              rec.detail = `primary :${killed.port} SIGKILLed, :${promoted.port} promoted`;
              note(rec);
              await sleep(f.durationMs);
              await retry("restart the old primary", () => topo.rejoin!(killed));
              // (the next failover must find a replica in sync to promote)
              await untilReplicaInSync(killed.port);
            }),
        );
        break;
      case "redis_restart":
        // Server faults run beside the schedule (a slow restart does not delay the next worker
        // fault); one at a time per server.
        redisChain = track(
          redisChain
            .catch(() => {})
            .then(async () => {
              rec.detail = f.hard ? "SIGKILL" : "SIGTERM";
              // (the leases Redis goes down with: the audit checks each re-run against them)
              rec.leases = await leasesHeld();
              rec.at = Date.now();
              note(rec);
              await redisServer!.kill(f.hard ? "SIGKILL" : "SIGTERM");
              await sleep(f.durationMs);
              // The outage ends when Redis answers a PING; resume()'s own probe can hang in a
              // connect during the AOF load and report it up to 10 s late.
              const answering = untilRedisAnswers(redisServer!.port).then(() => (rec.end = Date.now()));
              await retry("restart Redis", () => redisServer!.resume());
              await answering;
              note(rec);
            }),
        );
        break;
      case "postgres_restart":
        pgChain = track(
          pgChain
            .catch(() => {})
            .then(async () => {
              rec.detail = f.hard ? "SIGKILL" : "fast shutdown";
              rec.at = Date.now();
              note(rec);
              await (f.hard ? pg.kill() : pg.shutdown());
              await sleep(f.durationMs);
              await retry("restart PostgreSQL", () => pg.restart());
              rec.end = Date.now();
              note(rec);
            }),
        );
        break;
    }
    faults.push(rec);
  }
  let redisChain: Promise<unknown> = Promise.resolve();
  let pgChain: Promise<unknown> = Promise.resolve();
  /** Every lease held now (token and deadline), or undefined when Redis does not answer in 1 s. */
  async function leasesHeld(): Promise<FaultRecord["leases"]> {
    const read = (async () => {
      const out: NonNullable<FaultRecord["leases"]> = {};
      for (const q of queues) {
        const k = new QueueKeys(q);
        const flat = await redis.zrange(k.inflight, 0, -1, "WITHSCORES");
        const ids = flat.filter((_, i) => i % 2 === 0);
        const tokens = await Promise.all(ids.map((id) => redis.hget(`${k.jobPrefix}${id}`, "token")));
        ids.forEach(
          (id, i) => (out[leaseKey(q, id)] = { token: tokens[i] ?? "", deadline: Number(flat[2 * i + 1]) }),
        );
      }
      return out;
    })();
    const timeout = sleep(1000).then(() => undefined);
    return Promise.race([read.catch(() => undefined), timeout]);
  }
  async function retry(what: string, fn: () => Promise<void>): Promise<void> {
    for (let i = 1; ; i++) {
      try {
        return await fn();
      } catch (err) {
        say(`chaos: ${what} failed (${(err as Error).message.split("\n")[0]})${i < 10 ? "; retrying" : ""}`);
        if (i >= 10) throw err;
        await sleep(1000);
      }
    }
  }
  const injecting = (async () => {
    for (const f of schedule) {
      await sleepUntil(t0 + f.at);
      await inject(f);
    }
  })();

  const progress = setInterval(() => {
    void Promise.all(queues.map((q) => admin.counts(q)))
      .then((cs) => {
        say(
          `chaos: ${((Date.now() - t0) / 1000).toFixed(0)}s enqueued ${enqueued}/${o.jobs}${o.flows ? ` and ${flowJobs.length} flow jobs` : ""}, done ${cs[cs.length - 1]!.completed}; backlog ${cs.map((c, i) => `${STAGE_NAMES[i]}=${c.backlog}`).join(" ")}; faults ${faults.length}/${schedule.length}`,
        );
      })
      .catch(() => say(`chaos: ${((Date.now() - t0) / 1000).toFixed(0)}s (Redis not answering)`));
  }, 5000);

  let report: ChaosReport | undefined;
  try {
    await injecting;
    await sleepUntil(t0 + windowMs);
    await producing;
    await producingFlows;
    while (background.size > 0) await Promise.allSettled([...background]);
    for (const s of slots) if (s.state !== "up") say(`chaos: slot ${s.name} is ${s.state} after the window`);
    say(
      `chaos: fault window over after ${((Date.now() - t0) / 1000).toFixed(1)}s (${faults.length} faults, ${skipped} skipped); waiting for the pipeline to drain`,
    );

    // 4. settle: every job completed at the last stage or dead-lettered, nothing in flight
    const settleDeadline = Date.now() + o.settleTimeoutMs;
    for (;;) {
      const cs = await Promise.all(queues.map((q) => admin.counts(q))).catch(() => null);
      // flow jobs a dead parent cancelled (the `fail` policy) end neither completed nor dead
      const cancelled = o.flows
        ? await Promise.all(queues.map((q) => admin.counters(q)))
            .then((cn) => cn.reduce((a, c) => a + (c.cancelled ?? 0), 0))
            .catch(() => null)
        : 0;
      if (cs && cancelled !== null) {
        const done = cs[cs.length - 1]!.completed + cs.reduce((a, c) => a + c.dead, 0) + cancelled;
        if (
          done >= enqueued + flowJobs.length &&
          cs.every((c) => c.backlog === 0 && c.delayed === 0 && !c.waitingChildren)
        )
          break;
      }
      if (Date.now() > settleDeadline) {
        say("chaos: the pipeline did not drain before --settle-timeout; counting what is left as lost");
        break;
      }
      await sleep(250);
    }
    // 5. records: the outbox drained into PostgreSQL (entries are deleted once written)
    const outbox = new PipelineKeys(PIPELINE).outbox;
    for (;;) {
      const len = await redis.xlen(outbox).catch(() => -1);
      if (len === 0) break;
      if (Date.now() > settleDeadline + 60_000) {
        say(`chaos: the outbox still holds ${len} entries`);
        break;
      }
      await sleep(500);
    }
    // 6. a worker SIGTERMed just before the pipeline drained may still be in its warm shutdown
    // (up to its 25 s drain deadline): judged once it exited, or after the deadline and a margin.
    const shuttingDown = procs.filter(
      (p) => (p.fate === "sigterm" || p.fate === "upgrade") && p.exit === undefined,
    );
    if (shuttingDown.length > 0) {
      say(`chaos: waiting for ${shuttingDown.length} SIGTERMed worker(s) to finish their warm shutdown`);
      await Promise.race([Promise.all(shuttingDown.map((p) => p.w.exited)), sleep(SIGTERM_EXIT_WAIT_MS)]);
    }
    clearInterval(progress);
    writeFileSync(join(dir, "faults.json"), `${JSON.stringify(faults, null, 1)}\n`);
    report = await audit();
  } finally {
    clearInterval(progress);
    stopping = true;
    // stop the workers (warm shutdown), then the servers
    const live = procs.filter((p) => p.exit === undefined);
    for (const p of live) {
      p.fate ??= "final";
      p.w.signal("SIGCONT");
      p.w.signal("SIGTERM");
    }
    await Promise.all(
      live.map((p) =>
        Promise.race([p.w.exited, sleep(SIGTERM_EXIT_WAIT_MS)]).then(() => stopProcess(p.w, 5000)),
      ),
    );
    redis.disconnect();
    await topo.stop().catch(() => {});
    await pg.stop().catch(() => {});
  }
  if (!report) throw new Error("no report");
  const finalNonZero = procs
    .filter((p) => p.fate === "final" && p.exit !== 0)
    .map((p) => `${p.file} exited ${p.exit}`);
  if (finalNonZero.length)
    report.failures.push(`workers stopped at the end did not exit 0: ${finalNonZero.join(", ")}`);
  report.pass = report.failures.length === 0;
  report.elapsed_seconds = Math.round((Date.now() - started) / 1000);
  writeFileSync(join(dir, "report.json"), `${JSON.stringify(report, null, 2)}\n`);
  if (o.keep || !report.pass) report.dir = dir;
  else rmSync(dir, { recursive: true, force: true });
  return report;

  async function audit(): Promise<ChaosReport> {
    const failures: string[] = [];
    // what the handler saw
    const executions = readdirSync(join(dir, "exec")).flatMap((f) => readExecutions(join(dir, "exec", f)));
    // how executions ended, from the workers' logs
    const ends = new Map<string, EndOfExecution>();
    for (const p of procs) executionEnds(p.w.logs(), ends);
    const workerOfPid = new Map(procs.map((p) => [p.pid, p.file]));
    // Redis: final state of every job
    const keys = new PipelineKeys(PIPELINE);
    const states = new Map<string, { state: string; queue: string }>();
    // every job audited: the plain ones and the flows' (parents: flow jobs only)
    const jobs: { id: string; failsAt: number; parents?: string[] }[] = [...plan, ...flowJobs];
    for (let i = 0; i < jobs.length; i += 500) {
      const pipe = redis.pipeline();
      for (const j of jobs.slice(i, i + 500)) pipe.hmget(keys.job(j.id), "state", "queue");
      const res = (await pipe.exec()) ?? [];
      res.forEach(([, v], k) => {
        const [state, queue] = (v as (string | null)[]) ?? [];
        states.set(jobs[i + k]!.id, { state: state ?? "missing", queue: queue ?? "" });
      });
    }
    let completed = 0;
    let dead = 0;
    let flowCancelled = 0;
    const lostJobs: string[] = [];
    for (const j of jobs) {
      const s = states.get(j.id)!;
      if (s.state === "completed" && s.queue === last) completed++;
      else if (s.state === "dead") dead++;
      // the `fail` policy: a flow job whose parent died or was cancelled is cancelled
      else if (
        s.state === "cancelled" &&
        j.parents?.some((p) => ["dead", "cancelled"].includes(states.get(p)?.state ?? ""))
      )
        flowCancelled++;
      else lostJobs.push(`${j.id}: ${s.state}${s.queue ? ` at ${s.queue}` : ""}`);
    }
    // On Redis that fails over without "replicated", an acknowledged enqueue or settle can be lost
    // (docs/reliability.md): counted, not a failure. Anywhere else a lost job is one.
    const failovers = faults.filter((f) => f.kind === "failover").length;
    const lossesExpected = failovers > 0 && o.durability === "primary";
    if (lostJobs.length && !lossesExpected)
      failures.push(`${lostJobs.length} jobs lost (e.g. ${lostJobs.slice(0, 5).join("; ")})`);
    const deadReasons: Record<string, number> = {};
    for (const q of queues) {
      for (const d of await admin.deadJobs(q, 1_000_000)) {
        const reason = d.reason.replace(/\d+/g, "N");
        deadReasons[reason] = (deadReasons[reason] ?? 0) + 1;
        if (!/stalled N times/.test(reason))
          failures.push(`job ${d.id} dead-lettered at ${q} for an unexpected reason: ${d.reason}`);
      }
    }
    const counters = await Promise.all(queues.map((q) => admin.counters(q)));
    const sum = (k: string) => counters.reduce((a, c) => a + (c[k] ?? 0), 0);

    // PostgreSQL: a row per job in its final state, a row per execution, one completed execution per job and stage
    const jobRows = await pg.query<{ id: string; queue: string; state: string }>(
      "select id, queue, state from conveyor_jobs where pipeline = $1",
      [PIPELINE],
      "chaos",
    );
    const attemptRows = await pg.query<{
      job_id: string;
      execution: string;
      queue: string;
      outcome: string;
      started_ms: string | null;
      finished_ms: string | null;
    }>(
      "select job_id, execution, queue, outcome, (extract(epoch from started_at) * 1000)::bigint as started_ms, (extract(epoch from finished_at) * 1000)::bigint as finished_ms from conveyor_attempts where pipeline = $1",
      [PIPELINE],
      "chaos",
    );
    const rowOf = new Map(jobRows.map((r) => [r.id, r]));
    const missingJobRows = jobs.filter((j) => {
      const s = states.get(j.id)!;
      const r = rowOf.get(j.id);
      return !r || r.state !== s.state || r.queue !== s.queue;
    });
    const attemptKeys = new Set(attemptRows.map((r) => `${r.job_id}|${r.execution}`));
    const missingAttempts = executions.filter((e) => !attemptKeys.has(`${e.id}|${e.exec}`));
    const completedPerStage = countBy(
      attemptRows.filter((r) => r.outcome === "completed").map((r) => `${r.job_id}|${r.queue}`),
    );
    let inconsistent = 0;
    for (const [k, n] of completedPerStage) {
      if (n > 1) {
        inconsistent++;
        if (inconsistent <= 5) failures.push(`PostgreSQL records ${n} completed executions of ${k}`);
      }
    }
    // (decided below, once the re-runs are attributed: a failover can lose a claim and its record)
    const recordsCheck = () => {
      if (missingJobRows.length)
        failures.push(
          `${missingJobRows.length} jobs missing or stale in conveyor_jobs (e.g. ${missingJobRows
            .slice(0, 3)
            .map(
              (j) =>
                `${j.id} redis=${JSON.stringify(states.get(j.id))} pg=${JSON.stringify(rowOf.get(j.id) ?? null)}`,
            )
            .join("; ")})`,
        );
      if (missingAttempts.length)
        failures.push(
          `${missingAttempts.length} executions missing in conveyor_attempts (e.g. ${missingAttempts
            .slice(0, 3)
            .map((e) => `${e.id}@${e.q} exec ${e.exec}`)
            .join("; ")})`,
        );
    };
    const claimedAt = new Map(
      attemptRows.filter((r) => r.started_ms !== null).map((r) => [r.execution, Number(r.started_ms)]),
    );

    // every re-run, and why
    const failsAt = new Map(jobs.map((j) => [j.id, j.failsAt]));
    const a = attribute(executions, faults, {
      plannedFailure: (q, id, attempt) => attempt === 1 && queues.indexOf(q) === failsAt.get(id),
      ends,
      workerOfPid,
      claimedAt,
    });
    writeFileSync(join(dir, "duplicates.json"), `${JSON.stringify(a.duplicates, null, 1)}\n`);
    // An execution whose claim a failover lost (the job ran again) may have lost its record too.
    const lostClaims = new Set(a.duplicates.filter((d) => d.cause === "failover").map((d) => d.earlier.exec));
    const recordsLostInFailover = missingAttempts.filter((e) => lostClaims.has(e.exec)).length;
    if (lossesExpected) {
      // without "replicated" the records follow what Redis kept: reported, not judged
    } else {
      const kept = missingAttempts.filter((e) => !lostClaims.has(e.exec));
      missingAttempts.length = 0;
      missingAttempts.push(...kept);
      recordsCheck();
    }
    const recordsMissing = missingJobRows.length + missingAttempts.length;
    if (a.byCause.sigterm)
      failures.push(`${a.byCause.sigterm} re-runs after a SIGTERM (warm shutdown must not re-run work)`);
    if (a.byCause.upgrade)
      failures.push(
        `${a.byCause.upgrade} re-runs after a worker was replaced by one of the other release (warm shutdown must not re-run work)`,
      );
    // A restart re-runs a job only when the outage outlasted its lease, and then fenced.
    const restarts = auditRestartReruns(a.duplicates, faults, o.leaseMs);
    if (restarts.unjustified.length)
      failures.push(
        `${restarts.unjustified.length} re-runs after a Redis restart that the outage does not explain (e.g. ${restarts.unjustified
          .slice(0, 3)
          .map((u) => `${u.id}@${u.queue} exec ${u.exec}: ${u.why}`)
          .join("; ")})`,
      );
    if (a.byCause.other) failures.push(`${a.byCause.other} re-runs explained by no fault`);
    if (lostJobs.length && lossesExpected)
      say(`chaos: ${lostJobs.length} acknowledged jobs lost in ${failovers} failovers (durability primary)`);
    if (a.unplannedRetries) failures.push(`${a.unplannedRetries} failed attempts that were not planned`);
    const lastRuns = new Set(executions.filter((e) => e.q === last).map((e) => e.id));
    const neverRan = jobs.filter((j) => states.get(j.id)!.state === "completed" && !lastRuns.has(j.id));
    if (neverRan.length)
      failures.push(`${neverRan.length} jobs completed at ${last} without an execution there`);
    const sigtermExits = procs.filter((p) => (p.fate === "sigterm" || p.fate === "upgrade") && p.exit !== 0);
    if (sigtermExits.length)
      failures.push(
        `SIGTERMed workers that did not exit 0: ${sigtermExits.map((p) => `${p.file} (${p.exit ?? "still running"})`).join(", ")}`,
      );
    if (enqueued < o.jobs) failures.push(`only ${enqueued} of ${o.jobs} jobs were enqueued`);
    if (flowsEnqueued < o.flows) failures.push(`only ${flowsEnqueued} of ${o.flows} flows were enqueued`);

    // group limits: how many of a group ran at once (the handler's start and end records), and
    // the sequence's start order at the first stage
    const endsAt = new Map<string, number>();
    for (const f of readdirSync(join(dir, "ends")))
      readExecutionEnds(readFileSync(join(dir, "ends", f), "utf8"), endsAt);
    const groupAudit = auditGroupLimits(executions, endsAt, faults, {
      groupOf: (_q, id) => groupOfJob.get(id),
      limitOf,
      claimedAt,
      lapsedAt: new Map(restarts.lapsed.map((l) => [l.exec, l.at])),
    });
    for (const b of groupAudit.breaches)
      failures.push(
        `group ${b.group} at ${b.queue}: ${b.peak} executions at once at ${new Date(b.at).toISOString()}, limit ${b.limit}`,
      );
    const inversions =
      o.groups > 0
        ? sequenceInversions(
            executions,
            queues[0]!,
            plan.filter((j) => groupOfJob.get(j.id) === SEQUENCE_GROUP).map((j) => j.id),
          )
        : [];
    if (inversions.length)
      failures.push(
        `${inversions.length} jobs of sequence ${SEQUENCE_GROUP} started before one enqueued ahead of them (e.g. ${inversions.slice(0, 5).join(", ")})`,
      );

    // flows: no dependent started before each of its parents completed at the last stage (the
    // parent's completing execution: its handler's end record, else the record's finish time)
    const completedAt = new Map(
      attemptRows
        .filter((r) => r.outcome === "completed" && r.queue === last && r.finished_ms !== null)
        .map((r) => [r.job_id, endsAt.get(r.execution) ?? Number(r.finished_ms)]),
    );
    const flowOrder = flowOrderViolations(flowEdges, firstStarts(executions), completedAt);
    if (flowOrder.early.length)
      failures.push(
        `${flowOrder.early.length} flow dependents started before a parent completed (e.g. ${flowOrder.early
          .slice(0, 3)
          .map(
            (e) =>
              `${e.child} at ${e.startedAt}, parent ${e.parent} ${e.parentCompletedAt === undefined ? "never completed" : `completed at ${e.parentCompletedAt}`}`,
          )
          .join("; ")})`,
      );

    const lateDiscarded = [...ends.values()].filter(
      (e) => e.outcome === "fenced" || e.outcome === "leaseLost",
    ).length;
    const faultCounts: Record<string, number> = Object.fromEntries(kinds.map((k) => [k, 0]));
    const releaseOfPid = new Map(procs.map((p) => [p.pid, p.release]));
    const executionsByRelease = { this: 0, previous: 0 };
    for (const e of executions) executionsByRelease[releaseOfPid.get(e.pid) ?? "this"]++;
    for (const f of faults) faultCounts[f.kind] = (faultCounts[f.kind] ?? 0) + 1;
    return {
      redis: o.redis,
      durability: o.durability,
      seed: o.seed,
      seconds: o.seconds,
      jobs: o.jobs,
      enqueued,
      completed,
      lost: lostJobs.length,
      dead_lettered: dead,
      dead_reasons: deadReasons,
      executions: executions.length,
      retries: a.retries,
      unplanned_retries: a.unplannedRetries,
      duplicates: a.duplicates.length,
      duplicates_after_sigterm: a.byCause.sigterm,
      duplicates_after_upgrade: a.byCause.upgrade,
      duplicates_after_sigkill: a.byCause.sigkill,
      duplicates_after_sigstop: a.byCause.sigstop,
      duplicates_after_redis_restart: a.byCause.redis_restart,
      restart_reruns_lapsed_and_fenced: restarts.justified,
      redis_outages_ms: restarts.outagesMs,
      duplicates_after_failover: a.byCause.failover,
      lost_in_failover: failovers > 0 ? lostJobs.length : 0,
      records_lost_in_failover: recordsLostInFailover,
      duplicates_other: a.byCause.other,
      fenced_late_completions: sum("fenced"),
      late_results_discarded: lateDiscarded,
      stalled: sum("stalled"),
      handed_back: sum("handedBack"),
      records_missing_in_postgres: recordsMissing,
      records_inconsistent: inconsistent,
      groups: o.groups,
      group_peaks: groupAudit.peaks,
      group_limit_breaches: groupAudit.breaches.length,
      group_executions_cut: groupAudit.cut,
      sequence_inversions: inversions.length,
      flows: o.flows,
      flows_enqueued: flowsEnqueued,
      flow_jobs: flowJobs.length,
      flow_jobs_cancelled: flowCancelled,
      flow_edges_checked: flowOrder.checked,
      flow_dependents_early: flowOrder.early.length,
      faults: faultCounts,
      faults_skipped: skipped,
      workers_started: procs.length,
      sigterm_exits_nonzero: sigtermExits.length,
      upgrades_to_this: upgradesTo.this,
      upgrades_to_previous: upgradesTo.previous,
      executions_by_release: executionsByRelease,
      elapsed_seconds: 0,
      pass: false,
      failures,
      duplicate_examples: [
        ...a.duplicates.filter((d) => d.cause !== "sigkill" && d.cause !== "sigstop").slice(0, 10),
        ...a.duplicates.filter((d) => d.cause === "sigkill").slice(0, 2),
        ...a.duplicates.filter((d) => d.cause === "sigstop").slice(0, 2),
      ],
    };
  }
}

interface Topology {
  url: string;
  /** The one server of a single-node run (restarted by redis_restart faults). */
  single?: RedisServer;
  /** SIGKILL the primary serving the pipeline; resolves once a replica took over. */
  failover?: () => Promise<{ killed: RedisServer; promoted: RedisServer }>;
  /** Bring a killed node back as a replica of the current primary. */
  rejoin?: (killed: RedisServer) => Promise<void>;
  stop(): Promise<void>;
}

async function startTopology(kind: RedisTopology, dir: string): Promise<Topology> {
  if (kind === "sentinel") {
    const set = await RedisSentinelSet.start();
    return {
      url: set.url,
      failover: () => set.failover(),
      rejoin: (killed) => set.rejoin(killed),
      stop: () => set.stop(),
    };
  }
  if (kind === "cluster") {
    const cluster = await RedisClusterServer.start(3, { replicas: 1, nodeTimeoutMs: 1000 });
    const key = new PipelineKeys(PIPELINE).outbox;
    return {
      url: cluster.url,
      failover: () => cluster.failover(key),
      // (a Cluster node keeps its role in nodes.conf: it comes back as the new primary's replica)
      rejoin: (killed) => killed.resume(),
      stop: () => cluster.stop(),
    };
  }
  const single = await RedisServer.start({ dir, args: ["--appendonly", "yes", "--appendfsync", "always"] });
  return { url: single.url, single, stop: () => single.kill("SIGTERM") };
}

/** Resolves once the node on `port` is a replica whose link to its primary is up. */
async function untilReplicaInSync(port: number): Promise<void> {
  for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
    const r = new Redis({
      port,
      host: "127.0.0.1",
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    r.on("error", () => {});
    try {
      await r.connect();
      if (/master_link_status:up/.test(await r.info("replication"))) return;
    } catch {
      // still loading
    } finally {
      r.disconnect();
    }
    await sleep(100);
  }
}

/** Resolves once Redis on `port` answers PING (short timeouts, so a slow start is seen when it ends). */
async function untilRedisAnswers(port: number): Promise<void> {
  for (;;) {
    const r = new Redis({
      port,
      host: "127.0.0.1",
      lazyConnect: true,
      connectTimeout: 500,
      commandTimeout: 500,
      enableReadyCheck: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    r.on("error", () => {});
    try {
      await r.connect();
      if ((await r.ping()) === "PONG") return;
    } catch {
      // refused, or still loading
    } finally {
      r.disconnect();
    }
    await sleep(50);
  }
}

async function waitReady(w: WorkerProcess): Promise<void> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (w.child.exitCode !== null || w.child.signalCode !== null)
      throw new Error(`exited (${w.child.exitCode ?? w.child.signalCode}): ${w.logs().slice(-500)}`);
    try {
      if ((await fetch(`http://127.0.0.1:${w.port}/readyz`, { signal: AbortSignal.timeout(2000) })).ok)
        return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error("not ready within 90s");
    await sleep(100);
  }
}

function sleepUntil(t: number): Promise<void> {
  const ms = t - Date.now();
  return ms > 0 ? sleep(ms) : Promise.resolve();
}

function countBy(items: string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const k of items) m.set(k, (m.get(k) ?? 0) + 1);
  return m;
}

/** A human summary of a report. */
export function summary(r: ChaosReport): string {
  const lines = [
    `seed ${r.seed}, ${r.seconds}s fault window, ${r.elapsed_seconds}s in all`,
    `jobs ${r.jobs}${r.flow_jobs ? ` and ${r.flow_jobs} in flows` : ""}: completed ${r.completed}, dead-lettered ${r.dead_lettered}, lost ${r.lost} (Redis ${r.redis}, durability ${r.durability}${r.redis === "single" ? "" : `; lost in failovers ${r.lost_in_failover}, records lost with a claim ${r.records_lost_in_failover}`})`,
    `faults: ${Object.entries(r.faults)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}${r.faults_skipped ? ` (${r.faults_skipped} skipped: no live worker)` : ""}`,
    `executions ${r.executions}: planned retries ${r.retries}, re-runs ${r.duplicates} — after SIGKILL ${r.duplicates_after_sigkill}, after SIGSTOP ${r.duplicates_after_sigstop}, after a Redis restart ${r.duplicates_after_redis_restart} (lease lapsed in the outage and fenced: ${r.restart_reruns_lapsed_and_fenced}; outages ${r.redis_outages_ms.join(", ")} ms), after a failover ${r.duplicates_after_failover}, after SIGTERM ${r.duplicates_after_sigterm}, after an upgrade ${r.duplicates_after_upgrade}, unexplained ${r.duplicates_other}`,
    ...(r.upgrades_to_this + r.upgrades_to_previous > 0 || r.executions_by_release.previous > 0
      ? [
          `releases: workers replaced previous → this ${r.upgrades_to_this}, this → previous ${r.upgrades_to_previous}; executions by this release ${r.executions_by_release.this}, by the previous ${r.executions_by_release.previous}`,
        ]
      : []),
    `late completions fenced off ${r.fenced_late_completions} (late results discarded by workers ${r.late_results_discarded}); stalls ${r.stalled}, hand-backs ${r.handed_back}`,
    `PostgreSQL: ${r.records_missing_in_postgres} records missing, ${r.records_inconsistent} inconsistent`,
    ...(r.flows > 0
      ? [
          `flows ${r.flows_enqueued}/${r.flows} (${r.flow_jobs} jobs, ${r.flow_jobs_cancelled} cancelled after a dead parent): ${r.flow_edges_checked} edges checked, dependents started before a parent completed ${r.flow_dependents_early}`,
        ]
      : []),
    ...(r.groups > 0
      ? [
          `groups ${r.groups}: most running at once ${r.group_peaks.map((p) => `${p.group}@${p.queue.split("/").pop()} ${p.peak}/${p.limit}`).join(", ")}; over a limit ${r.group_limit_breaches}; cut at a fault ${r.group_executions_cut}; sequence out of order ${r.sequence_inversions}`,
        ]
      : []),
    r.pass ? "PASS" : `FAIL:\n  - ${r.failures.join("\n  - ")}`,
  ];
  if (r.dir) lines.push(`run directory: ${r.dir}`);
  return lines.join("\n");
}

if (import.meta.main) {
  let o: ReturnType<typeof parseChaosArgs>;
  try {
    o = parseChaosArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`chaos: ${(err as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  process.stdout.write(`chaos: seed ${o.seed}\n`);
  const say = (line: string) => process.stderr.write(`${line}\n`);
  try {
    const report = await runChaos(o, say);
    if (o.json) {
      say(summary(report));
      process.stdout.write(`${JSON.stringify(report)}\n`);
    } else process.stdout.write(`${summary(report)}\n`);
    process.exit(report.pass ? 0 : 1);
  } catch (err) {
    say(`chaos: run failed: ${(err as Error).stack ?? String(err)}`);
    process.exit(3);
  }
}
