// Every `conveyor` command, in the order `conveyor --help` lists them: its name, its synopsis and
// how to load it. A command's module (and what it imports: ioredis, the API server, the worker)
// is loaded only when that command runs or shows its --help, so start-up pays for one command.
// A new command: a file here (defineCommand in ../command.ts) and an entry below; `npm run
// gen:config` updates the docs.
import type { Command } from "../command.ts";

export interface CommandEntry {
  name: string;
  /** Its lines in `conveyor --help`, each starting "  <name> ". */
  synopsis: string;
  load(): Promise<Command>;
}

// Loaders named at the top level: tsc (5.9, ESM) leaves a `.ts` import() inside an object literal
// unrewritten, and the compiled CLI would look for .ts files dist/ does not have.
const enqueue = () => import("./enqueue.ts");
const stats = () => import("./stats.ts");
const job = () => import("./job.ts");
const dlq = () => import("./dlq.ts");
const cancel = () => import("./cancel.ts");
const flow = () => import("./flow.ts");
const layout = () => import("./layout.ts");
const promote = () => import("./promote.ts");
const deleteJobs = () => import("./delete.ts");
const pauseResume = () => import("./pause.ts");
const limit = () => import("./limit.ts");
const group = () => import("./group.ts");
const resource = () => import("./resource.ts");
const schedule = () => import("./schedule.ts");
const contract = () => import("./contract.ts");
const events = () => import("./events.ts");
const records = () => import("./records.ts");
const api = () => import("./api.ts");
const token = () => import("./token.ts");
const audit = () => import("./audit.ts");
const scripts = () => import("./scripts.ts");
const worker = () => import("./worker.ts");
const operator = () => import("./operator.ts");
const rollout = () => import("./rollout.ts");

const byDefault = (load: () => Promise<{ default: Command }>) => async () => (await load()).default;

export const COMMANDS: readonly CommandEntry[] = [
  {
    name: "enqueue",
    synopsis: `  enqueue <queue> '<json>' [--id ID] [--key KEY] [--task NAME] [--priority N] [--delay 10s] [--attempts N] [--timeout 30s] [--group G]
          [--debounce KEY:WINDOW | --throttle KEY:WINDOW] [--uses openai:tokens=1200]
  enqueue <queue> --file jobs.ndjson      one job per line (JSON data, or {"data":…,"id":…,"task":…,"priority":…,"group":…,"dedupe":…,"uses":…})`,
    load: byDefault(enqueue),
  },
  {
    name: "stats",
    synopsis:
      "  stats <queue> [--json]                  ready, delayed, inflight, completed, dead; paused, rate limit, cancelled, schedules, served",
    load: byDefault(stats),
  },
  {
    name: "job",
    synopsis:
      "  job <id> [--queue Q] [--database URL] [--json]\n" +
      "                                          state, attempts, result or last error, each stage's attempts and result, progress, log lines (exit 1: not found)",
    load: byDefault(job),
  },
  {
    name: "dlq",
    synopsis: `  dlq list|retry|purge <queue> [--limit N] [--json]   dead letters
  dlq retry <queue> <id>…                 retry only these (exit 1: none of them is dead)`,
    load: byDefault(dlq),
  },
  {
    name: "cancel",
    synopsis:
      "  cancel <id> [--queue Q] [--json]        cancel a waiting, delayed or running job (a fan-out parent: its children too)",
    load: byDefault(cancel),
  },
  {
    name: "flow",
    synopsis: `  flow <id> [--pipeline P] [--json] [--wait D] [--database URL]   a flow's jobs by state: each job's key, state, queue, id and parents; with --database from the records once Redis let it go (exit 1: not found)
  flow cancel <id> [--pipeline P] [--json]   cancel every unfinished job of a flow (running ones at their next heartbeat)
  flow repair <id> [--pipeline P] [--json]   tell the dependents of flow jobs a worker of an earlier release ended`,
    load: byDefault(flow),
  },
  {
    name: "layout",
    synopsis: `  layout status <pipeline> [--json]       the layout in force, the newest every live worker, operator and API reads, each one's version
  layout finalize <pipeline> [--json]     move the layout in force forward (exit 1: refused, naming the readers behind)`,
    load: byDefault(layout),
  },
  {
    name: "promote",
    synopsis:
      "  promote <id> [--queue Q] [--json]       run a delayed job now (exit 1: not found or not delayed)",
    load: byDefault(promote),
  },
  {
    name: "delete",
    synopsis:
      "  delete <queue> <id>… [--json]           delete waiting, delayed, dead or finished jobs (running ones are refused: cancel first)",
    load: byDefault(deleteJobs),
  },
  {
    name: "rollout",
    synopsis:
      "  rollout status|promote|abort <pool> [--namespace NS] [--kubeconfig FILE] [--json]   a WorkerPool's canary rollout",
    load: byDefault(rollout),
  },
  {
    name: "pause",
    synopsis: "  pause <queue>                           stop claiming from a queue (running jobs finish)",
    load: async () => (await pauseResume()).pause,
  },
  {
    name: "resume",
    synopsis: "  resume <queue>                          claim from a paused queue again",
    load: async () => (await pauseResume()).resume,
  },
  {
    name: "limit",
    synopsis:
      "  limit <queue> <N>/<s|m|h> | off         a global rate limit: at most N job starts in any window",
    load: byDefault(limit),
  },
  {
    name: "group",
    synopsis: `  group limit|set <queue> [<group>] [--concurrency N|off] [--rate N/<s|m|h>|off] [--weight N|off] [--on-dead block|continue|off]
                                          a group's settings (no group: every group's default)
  group pause|resume <queue> <group>      stop or restart starting one group's jobs
  group list <queue> [--limit N] [--json] groups by waiting jobs: running / limit, paused`,
    load: byDefault(group),
  },
  {
    name: "resource",
    synopsis: `  resource set <name> --key ID --limit requests=60/m,tokens=200000/m [--key …] [--ceiling 0.9] --pipeline P
                                          API keys with budgets, checked when jobs are claimed
  resource list [--pipeline P] [--json]   each key's use of each limit in its window, benches, jobs waiting
  resource remove <name> --pipeline P     delete a resource (its windows too)`,
    load: byDefault(resource),
  },
  {
    name: "schedule",
    synopsis: `  schedule add <queue> <name> (--every 5m | --cron '0 * * * *' [--tz Area/City]) ['<json>'] [--attempts N]
  schedule list <queue> [--json] | remove <queue> <name>    repeating jobs (next run shown by list)`,
    load: byDefault(schedule),
  },
  {
    name: "contract",
    synopsis: `  contract set <queue> (--file CONTRACT.json|yaml | --data SCHEMA --result SCHEMA)
                                          JSON Schemas every door checks the queue's job data (and results) against
  contract get <queue> [--json] | delete <queue>   the contract in force (exit 1: none)
  contract types (<queue> | --file CONTRACT.json|yaml) --lang ts|python [--out FILE]
                                          TypeScript types or Python TypedDicts for each task's data and result`,
    load: byDefault(contract),
  },
  {
    name: "records",
    synopsis: `  records enable <pipeline>               switch job records on before the first job (workers without the operator or API)
  records status <pipeline> [--json]      on or off, the outbox waiting for a recorder (exit 1: off)`,
    load: byDefault(records),
  },
  {
    name: "events",
    synopsis:
      "  events <queue> [--follow] [--limit N] [--json]  job transitions in order (enqueued, started, progress, completed…)",
    load: byDefault(events),
  },
  {
    name: "api",
    synopsis:
      "  api [--port 8080] [--host 0.0.0.0] [--max-body N]  the job API and the dashboard over HTTP (bearer token from CONVEYOR_API_TOKEN)\n" +
      "      [--read-only] [--queues a,b] [--database URL] [--kubernetes auto|off] [--dashboard on|off] [--insecure-no-auth]\n" +
      "      [--durability primary|replicated] [--replica-timeout 2s] [--tokens-file tokens.yaml]",
    load: byDefault(api),
  },
  {
    name: "token",
    synopsis:
      "  token create <name> --scope 'pipeline=docs,groups=acme,verbs=read+enqueue' [--rate 50/s] --file F [--json]   a scoped API token (printed once)\n" +
      "  token list|revoke <name> --file F      the tokens file conveyor api --tokens-file serves",
    load: byDefault(token),
  },
  {
    name: "audit",
    synopsis:
      "  audit [--since 1h] [--token NAME] [--verb operate|admin] [--target QUEUE] [--json]   the job API's audit trail (PostgreSQL; --json: JSON lines)",
    load: byDefault(audit),
  },
  {
    name: "scripts",
    synopsis:
      "  scripts dump <dir> | show <name>        the published Lua scripts, includes resolved, and library.lua (for other languages)",
    load: byDefault(scripts),
  },
  {
    name: "worker",
    synopsis: "  worker [options]                        run the generic worker (conveyor worker --help)",
    load: byDefault(worker),
  },
  {
    name: "operator",
    synopsis:
      "  operator [options]                      run the WorkerPool operator (conveyor operator --help)",
    load: byDefault(operator),
  },
];
