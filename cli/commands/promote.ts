// `conveyor promote`: run a delayed job now.
import { defineJobCommand, print } from "../command.ts";

export default defineJobCommand({
  name: "promote",
  async run({ id, queue: given, admin, json }) {
    const queue = given ?? (await admin.job(id))?.queue;
    const r = queue
      ? await admin.promote(id, queue)
      : { id, queue: "", outcome: "notFound" as const, state: "" };
    if (json) print(JSON.stringify(r));
    else if (r.outcome === "promoted") print(`promoted ${id}: ready in ${r.queue}, it runs next by priority`);
    else if (r.outcome === "notDelayed") print(`${id} is ${r.state}, not delayed: nothing to run now`);
    else print(`job ${id} not found (never enqueued, or its record expired)`);
    return r.outcome === "promoted" ? 0 : 1;
  },
});
