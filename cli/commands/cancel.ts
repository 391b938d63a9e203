// `conveyor cancel`: stop a waiting, delayed or running job (a fan-out parent: its children too).
import { defineJobCommand, print } from "../command.ts";

export default defineJobCommand({
  name: "cancel",
  async run({ id, queue, admin, json }) {
    const r = await admin.cancel(id, queue);
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
