// `conveyor layout status|finalize <pipeline>`: the pipeline's layout in force, the newest every
// live reader (worker, operator, job API) can read, and moving it forward (docs/protocol.md,
// "Layout versions").
import { auditedCli, pipelineOfQueue } from "../audit.ts";
import { hostname } from "node:os";
import { COMMON, defineCommand, print, UsageError, withRedis } from "../command.ts";

const queue = () => import("../../queue/index.ts");

const USAGE = "layout status <pipeline> [--json] | layout finalize <pipeline> [--json]";

export default defineCommand({
  name: "layout",
  args: ["status <pipeline>", "finalize <pipeline>"],
  settings: COMMON,
  async run(o) {
    const [action, pipeline] = o.positionals;
    if ((action !== "status" && action !== "finalize") || !pipeline) throw new UsageError(USAGE);
    const json = o.bool("json");
    const q = await queue();
    try {
      q.assertPipelineName(pipeline);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    return withRedis(o.str("redis")!, async (redis) => {
      if (action === "status") {
        const s = await q.layoutStatus(redis, pipeline);
        if (json) {
          print(JSON.stringify(s));
          return 0;
        }
        print(
          `pipeline ${pipeline}: layout ${s.inForce} in force` +
            (s.finalizedAt ? ` (finalized ${new Date(s.finalizedAt).toISOString()})` : "") +
            `; the newest every live reader reads: ${s.newestReadable}`,
        );
        if (s.readers.length === 0) print("no live readers");
        for (const r of s.readers)
          print(
            `  ${r.kind.padEnd(8)} ${r.id}${r.queue ? ` (${r.queue})` : ""}  ${r.version ?? "a release before layouts"}  reads ${q.rangeText(r.layouts)}`,
          );
        return 0;
      }
      try {
        const r = await auditedCli(
          redis,
          {
            pipeline,
            verb: "admin",
            operation: "layoutFinalize",
            target: `pipeline:${pipeline}`,
            params: {},
          },
          () => q.finalizeLayout(redis, pipeline, { by: `conveyor-cli@${hostname()}` }),
          (r) => ({ result: r }),
        );
        if (json) print(JSON.stringify(r));
        else
          print(
            r.moved
              ? `pipeline ${pipeline}: layout ${r.to} in force (was ${r.from})`
              : `pipeline ${pipeline}: layout ${r.to} already in force`,
          );
        return 0;
      } catch (err) {
        if (!(err instanceof q.FinalizeRefusedError)) throw err;
        if (json) print(JSON.stringify({ pipeline, to: err.to, refused: err.message, behind: err.behind }));
        process.stderr.write(`conveyor layout: ${err.message}\n`);
        return 1;
      }
    });
  },
});
