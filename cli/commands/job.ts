// `conveyor job`: one job's state, result or error, progress and log lines.
import { defineJobCommand, print, safeJson } from "../command.ts";

export default defineJobCommand({
  name: "job",
  async run({ id, queue, admin, json: asJson }) {
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
    const view = {
      id: info.id,
      queue: info.queue,
      state: info.state,
      attempts: info.attemptsMade,
      maxAttempts: info.attempts,
      stalls: info.stalls,
      handbacks: info.handbacks,
      result: decode(info.result),
      error: decode(info.error),
      deadReason: info.deadReason,
      progress: info.progress,
      progressMessage: info.progressMessage,
      logs: await admin.jobLogs(id, info.queue || queue),
    };
    if (asJson) {
      print(JSON.stringify(view));
      return 0;
    }
    print(`job ${view.id} on ${view.queue}: ${view.state}`);
    print(
      `attempts ${view.attempts}/${view.maxAttempts}, stalls ${view.stalls}, handbacks ${view.handbacks}`,
    );
    if (view.result !== undefined) print(`result ${JSON.stringify(view.result)}`);
    if (view.error !== undefined) print(`last error ${JSON.stringify(view.error)}`);
    if (view.deadReason) print(`dead: ${view.deadReason}`);
    if (view.progress !== undefined)
      print(`progress ${view.progress}${view.progressMessage ? ` ${view.progressMessage}` : ""}`);
    if (view.logs.length > 0) print(`log (last ${view.logs.length} lines):`);
    for (const line of view.logs) print(`  ${new Date(line.at).toISOString()} ${line.message}`);
    return 0;
  },
});
