// `conveyor cancel`: stop a waiting, delayed or running job (a fan-out parent: its children too).
import { auditedCli, pipelineOfQueue } from "../audit.ts";
import { defineJobCommand, print } from "../command.ts";

export default defineJobCommand({
  name: "cancel",
  async run({ id, queue, admin, json, redis }) {
    // (the pipeline names the audit stream: a job found nowhere changes nothing to audit)
    const where = queue ?? (await admin.job(id))?.queue;
    const r = where
      ? await auditedCli(
          redis,
          {
            pipeline: pipelineOfQueue(where),
            verb: "operate",
            operation: "cancelJob",
            target: `${where} job:${id}`,
            params: { id, queue: where },
          },
          () => admin.cancel(id, where),
          (r) => ({ jobs: r.outcome === "cancelled" ? r.jobsCancelled : 0, result: r }),
        )
      : await admin.cancel(id, queue);
    if (json) print(JSON.stringify(r));
    else if (r.outcome === "cancelled")
      print(
        r.state === "active"
          ? `cancelled ${id} (running: its worker aborts it at the next heartbeat)`
          : r.jobsCancelled > 1 || r.state === "fannedOut" || r.state === "joined"
            ? `cancelled ${id} and ${r.jobsCancelled} unfinished job(s) of its fan-out; the join will not run`
            : `cancelled ${id} (was ${r.state})`,
      );
    else if (r.outcome === "finished") print(`${id} is already ${r.state}: nothing to cancel`);
    else print(`job ${id} not found (never enqueued, or its record expired)`);
    return r.outcome === "cancelled" ? 0 : 1;
  },
});
