// `conveyor flow`: a flow's jobs by state, each job's key, state and parents (from the job
// records with --database once Redis has let the flow go); cancel; and repair (tell the
// dependents a worker of a release before flows left waiting).
import { DATABASE_URL_SETTING } from "../../lib/settings.ts";
import type { FlowView } from "../../queue/flows.ts";
import { COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";
import { printWait, WAIT_SETTING, waitExitCode } from "../waits.ts";

// (loaded when the command runs: `conveyor --help` stays fast)
const queue = () => import("../../queue/index.ts");
const records = () => import("../../records/index.ts");

/** The flow as the records keep it (records/flows.ts); null without a database or a record of it. */
async function fromRecords(databaseUrl: string | undefined, id: string, pipeline?: string) {
  if (!databaseUrl) return null;
  const { createPool, recordedFlow, RecordsQueries } = await records();
  const pool = createPool(databaseUrl, { applicationName: "conveyor-cli", queryTimeoutMs: 10_000 });
  try {
    return await recordedFlow(new RecordsQueries(pool), id, pipeline);
  } finally {
    await pool.end();
  }
}

const USAGE =
  "flow <id> [--pipeline P] [--json] [--wait D] [--database URL] | flow cancel <id> [--pipeline P] [--json] | flow repair <id> [--pipeline P] [--json]";

export default defineCommand({
  name: "flow",
  args: ["cancel <id>", "repair <id>", "<id>"],
  settings: {
    ...COMMON,
    pipeline: { kind: "string", arg: "P", help: "the flow's pipeline (default: looked up from the flow)" },
    wait: WAIT_SETTING,
    database: {
      ...DATABASE_URL_SETTING,
      help: "PostgreSQL job records: a flow's view once Redis has let it go",
    },
  },
  async run(o) {
    const cancel = o.positionals[0] === "cancel" && o.positionals.length === 2;
    const repair = o.positionals[0] === "repair" && o.positionals.length === 2;
    const id = cancel || repair ? o.positionals[1] : o.positionals[0];
    if (!id) throw new UsageError(USAGE);
    const [pipeline, json] = [o.raw("pipeline"), o.bool("json")];
    const waitMs = o.maybeDuration("wait");
    if ((cancel || repair) && waitMs !== undefined)
      throw new UsageError(`--wait is for a flow's view: ${USAGE}`);
    const { QueueAdmin, InvalidNameError, Producer } = await queue();
    return withRedis(o.str("redis")!, async (redis) => {
      const admin = new QueueAdmin(redis);
      try {
        if (cancel) {
          const r = await admin.cancelFlow(id, pipeline);
          if (json) print(JSON.stringify(r));
          else if (r.outcome === "notFound") print(`flow ${id} not found (never enqueued, or expired)`);
          else
            print(
              `cancelled ${r.jobsCancelled} unfinished job(s) of flow ${id} (${r.total} in all; running ones are aborted at their next heartbeat)`,
            );
          return r.outcome === "cancelled" ? 0 : 1;
        }
        if (repair) {
          const r = await admin.repairFlow(id, pipeline);
          if (json) print(JSON.stringify(r));
          else if (r.outcome === "notFound") print(`flow ${id} not found (never enqueued, or expired)`);
          else
            print(
              `told the dependents of ${r.jobsTold} ended job(s) of flow ${id} (${r.total} in all` +
                (r.jobsGone > 0 ? `; ${r.jobsGone} ended job(s) already reclaimed, not told` : "") +
                ")",
            );
          return r.outcome === "repaired" ? 0 : 1;
        }
        let view: FlowView | null = await admin.flow(id, pipeline);
        let recorded = false;
        if (!view && waitMs === undefined) {
          view = await fromRecords(o.raw("database"), id, pipeline);
          recorded = view !== null;
        }
        if (!view) {
          if (json) print(JSON.stringify(null));
          else print(`flow ${id} not found (never enqueued, or expired)`);
          return 1;
        }
        if (waitMs !== undefined) {
          const keyOf = new Map(view.jobs.map((j) => [j.id, j.key]));
          const waited = await new Producer(redis).waitFor(
            view.jobs.map((j) => ({ id: j.id, queue: j.queue })),
            { timeoutMs: waitMs },
          );
          printWait(waited, json, (id) => `${keyOf.get(id)}  ${id}`);
          return waitExitCode(waited);
        }
        if (json) {
          print(JSON.stringify(recorded ? { ...view, source: "records" } : view));
          return 0;
        }
        print(
          `flow ${view.id} (pipeline ${view.pipeline}, ${view.jobs.length} jobs, created ${new Date(view.createdAt).toISOString()})` +
            (recorded ? " — from the records: Redis has let it go" : ""),
        );
        print(
          Object.entries(view.counts)
            .sort()
            .map(([state, n]) => `${state}: ${n}`)
            .join(", "),
        );
        for (const j of view.jobs) {
          const waits = j.pending !== undefined ? ` (waiting for ${j.pending})` : "";
          const from = j.parents.length > 0 ? ` ← ${j.parents.join(", ")}` : "";
          const why = j.reason ? ` — ${j.reason}` : "";
          print(`  ${j.key}  ${j.state}${waits}  ${j.queue}  ${j.id}${from}${why}`);
        }
        return 0;
      } catch (err) {
        if (err instanceof InvalidNameError) throw new UsageError(err.message);
        throw err;
      }
    });
  },
});
