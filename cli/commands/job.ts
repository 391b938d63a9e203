// `conveyor job`: one job's state, attempts, result or error, its stages, progress and log lines.
import { DATABASE_URL_SETTING } from "../../lib/settings.ts";
import { parseAttemptErrors } from "../../queue/attemptErrors.ts";
import type { JobStage } from "../../queue/types.ts";
import { pipelineOf } from "../../queue/keys.ts";
import { readDeliveries } from "../../queue/notifications.ts";
import { COMMON, defineCommand, print, safeJson, UsageError, withRedis } from "../command.ts";

const adminModule = () => import("../../queue/admin.ts");

/** A detail of an attempt error: a contract violation as `pointer: message`, else its JSON. */
function describeDetail(d: unknown): string {
  if (typeof d === "object" && d !== null && typeof (d as { pointer?: unknown }).pointer === "string") {
    const v = d as { pointer: string; message?: unknown; rule?: unknown };
    return `${v.pointer || "/"}: ${typeof v.message === "string" ? v.message : String(v.rule ?? "")}`;
  }
  return JSON.stringify(d);
}
const records = () => import("../../records/index.ts");
const iso = (ms: number | undefined) => (ms ? new Date(ms).toISOString() : undefined);

/** Each stage's result and attempts: from Redis, joined with the records when a database is given. */
async function stages(
  live: JobStage[],
  databaseUrl: string | undefined,
  pipeline: string,
  id: string,
  state: string,
): Promise<(JobStage & { data?: string })[]> {
  if (!databaseUrl) return live;
  const { createPool, joinStages, recordedStages } = await records();
  const pool = createPool(databaseUrl, { applicationName: "conveyor-cli", queryTimeoutMs: 10_000 });
  try {
    return joinStages(live, await recordedStages(pool, pipeline, id), state);
  } finally {
    await pool.end();
  }
}

export default defineCommand({
  name: "job",
  args: ["<id>"],
  settings: {
    ...COMMON,
    queue: { kind: "string", arg: "Q", help: "the job's queue (default: looked up from the job)" },
    database: {
      ...DATABASE_URL_SETTING,
      help: "PostgreSQL job records: earlier stages' results (Redis keeps only their attempts)",
    },
  },
  async run(o) {
    const [id] = o.positionals;
    if (!id) throw new UsageError("job <id> [--queue Q]");
    const [queue, asJson] = [o.raw("queue"), o.bool("json")];
    const { NOT_SERVED_WARNING, QueueAdmin } = await adminModule();
    return withRedis(o.str("redis")!, async (redis) => {
      const admin = new QueueAdmin(redis);
      const info = await admin.job(id, queue);
      if (!info) {
        print(
          asJson
            ? JSON.stringify({ id, state: "unknown" })
            : `job ${id}: not found (never enqueued, or its record expired)`,
        );
        return 1;
      }
      const decode = (s?: string) => (s === undefined ? undefined : safeJson(s));
      const served = info.queue ? await admin.served(info.queue) : true;
      const deliveries = await readDeliveries(redis, pipelineOf(info.queue || queue || ""), id);
      const view = {
        id: info.id,
        queue: info.queue,
        state: info.state,
        ...(info.task ? { task: info.task } : {}),
        attempts: info.attemptsMade,
        maxAttempts: info.attempts,
        stalls: info.stalls,
        handbacks: info.handbacks,
        result: decode(info.result),
        error: decode(info.error),
        previousErrors: parseAttemptErrors(info.errors),
        rejected: decode(info.rejected),
        deadReason: info.deadReason,
        progress: info.progress,
        progressMessage: info.progressMessage,
        stages: (await stages(info.stages, o.raw("database"), info.queue.split("/")[0]!, id, info.state)).map(
          ({ data: _input, ...st }) => ({
            ...st,
            result: decode(st.result),
            error: decode(st.error),
            // (as GET /jobs/{id} gives them)
            startedAt: iso(st.startedAt),
            finishedAt: iso(st.finishedAt),
          }),
        ),
        ...(served ? {} : { warning: NOT_SERVED_WARNING }),
        logs: await admin.jobLogs(id, info.queue || queue),
        // (only for a job that has any: docs/notifications.md)
        ...(deliveries.length > 0
          ? {
              notifications: deliveries.map((d) => ({
                ...d,
                firstAt: iso(d.firstAt),
                lastAt: iso(d.lastAt),
                nextAt: iso(d.nextAt),
              })),
            }
          : {}),
      };
      if (asJson) {
        print(JSON.stringify(view));
        return 0;
      }
      print(`job ${view.id} on ${view.queue}${view.task ? ` (task ${view.task})` : ""}: ${view.state}`);
      if (!served) print(`warning: ${NOT_SERVED_WARNING} (${view.queue}): is its name right?`);
      print(
        `attempts ${view.attempts}/${view.maxAttempts}, stalls ${view.stalls}, handbacks ${view.handbacks}` +
          (view.stages.length > 1 ? " (this stage's)" : ""),
      );
      if (view.result !== undefined) print(`result ${JSON.stringify(view.result)}`);
      if (view.error !== undefined) print(`last error ${JSON.stringify(view.error)}`);
      if (view.deadReason) print(`dead: ${view.deadReason}`);
      if (view.previousErrors.length > 0) print("failed attempts (last 5):");
      for (const e of view.previousErrors) {
        print(`  #${e.attempt} ${e.kind} ${new Date(e.at).toISOString()}: ${e.message}`);
        // (an invalid result's violations: the failing paths)
        for (const d of e.details ?? []) print(`      ${describeDetail(d)}`);
      }
      if (view.rejected !== undefined) print(`rejected result ${JSON.stringify(view.rejected)}`);
      if (view.stages.length > 1) {
        print("stages:");
        for (const st of view.stages)
          print(
            `  ${st.queue}: ${st.state}, attempts ${st.attempts}` +
              (st.result !== undefined ? `, result ${JSON.stringify(st.result)}` : "") +
              (st.error !== undefined ? `, last error ${JSON.stringify(st.error)}` : ""),
          );
      }
      if (view.progress !== undefined)
        print(`progress ${view.progress}${view.progressMessage ? ` ${view.progressMessage}` : ""}`);
      if (view.logs.length > 0) print(`log (last ${view.logs.length} lines):`);
      for (const line of view.logs) print(`  ${new Date(line.at).toISOString()} ${line.message}`);
      if (view.notifications) print("notifications:");
      for (const d of view.notifications ?? [])
        print(
          `  ${d.event} → ${d.url}: ${d.state} after ${d.attempts} attempt(s), last ${d.lastAt} answered ${d.status || "nothing"}${d.answer ? ` ${JSON.stringify(d.answer)}` : ""}${d.nextAt ? `, next at ${d.nextAt}` : ""}`,
        );
      return 0;
    });
  },
});
