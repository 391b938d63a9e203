// `conveyor records`: switch a pipeline's job records on before its first job (bare workers,
// no operator or job API to do it), and see whether they are on (docs/records.md).
import { auditedCli, pipelineOfQueue } from "../audit.ts";
import {
  assertQueueNameForUsage,
  COMMON,
  defineCommand,
  print,
  UsageError,
  when,
  withRedis,
} from "../command.ts";

const recordsModule = () => import("../../queue/records.ts");

const USAGE = `records enable <pipeline>
  records status <pipeline> [--json]`;

export default defineCommand({
  name: "records",
  args: ["enable <pipeline>", "status <pipeline>"],
  settings: COMMON,
  async run(o) {
    const [action, pipeline, ...rest] = o.positionals;
    if (!action || !pipeline || rest.length > 0) throw new UsageError(USAGE);
    if (action !== "enable" && action !== "status")
      throw new UsageError(`unknown records action ${JSON.stringify(action)}: ${USAGE}`);
    // (a queue `docs/ocr` names its pipeline `docs`)
    assertQueueNameForUsage(pipeline);
    const asJson = o.bool("json");
    const { enableRecords, recordsStatus } = await recordsModule();
    return withRedis(o.str("redis")!, async (redis) => {
      if (action === "enable") {
        const switched = await auditedCli(
          redis,
          {
            pipeline: pipelineOfQueue(pipeline),
            verb: "admin",
            operation: "recordsEnable",
            target: `pipeline:${pipelineOfQueue(pipeline)}`,
            params: {},
          },
          () => enableRecords(redis, pipeline),
          (switched) => ({ result: { switched } }),
        );
        const name = pipeline.split("/")[0]!;
        print(
          asJson
            ? JSON.stringify({ pipeline: name, on: true, switched })
            : switched
              ? `job records on for pipeline ${name}: its transitions go to the outbox until a worker with --database records them`
              : `job records were already on for pipeline ${name}`,
        );
        return 0;
      }
      const s = await recordsStatus(redis, pipeline);
      if (asJson) print(JSON.stringify(s));
      else
        print(
          [
            `pipeline ${s.pipeline}: job records ${s.on ? "on" : "off"}`,
            `outbox: ${s.outbox} entries waiting, ${s.pending} read and not yet recorded, oldest ${when(s.oldestAt)}`,
            `recorders: ${s.recorders}`,
          ].join("\n"),
        );
      return s.on ? 0 : 1;
    });
  },
});
