// `conveyor flow`: a flow's jobs by state, each job's key, state and parents; cancel; and repair
// (tell the dependents a worker of a release before flows left waiting).
import { COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";
import { printWait, WAIT_SETTING, waitExitCode } from "../waits.ts";

// (loaded when the command runs: `conveyor --help` stays fast)
const queue = () => import("../../queue/index.ts");

const USAGE =
  "flow <id> [--pipeline P] [--json] [--wait D] | flow cancel <id> [--pipeline P] [--json] | flow repair <id> [--pipeline P] [--json]";

export default defineCommand({
  name: "flow",
  args: ["cancel <id>", "repair <id>", "<id>"],
  settings: {
    ...COMMON,
    pipeline: { kind: "string", arg: "P", help: "the flow's pipeline (default: looked up from the flow)" },
    wait: WAIT_SETTING,
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
        const view = await admin.flow(id, pipeline);
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
          print(JSON.stringify(view));
          return 0;
        }
        print(
          `flow ${view.id} (pipeline ${view.pipeline}, ${view.jobs.length} jobs, created ${new Date(view.createdAt).toISOString()})`,
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
