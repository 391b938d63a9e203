// The reconcile's records step: a pool with spec.database records its pipeline from the first job
// on, whoever enqueues it: job records are switched on in its Redis before the Deployment (so
// before any pod starts). Asked once per pipeline and operator process; a log line and an Event
// when this switched them.
import { pipelineOf } from "../../queue/index.ts";
import { Result } from "../kube/result.ts";
import type { PoolPass, StepDeps } from "./poolPass.ts";
import { Reason } from "./reasons.ts";

/** Try again this soon when job records could not be switched on. */
const RECORDS_RETRY_MS = 5_000;

export async function switchRecordsOn(deps: StepDeps, pass: PoolPass): Promise<void> {
  const { spec, state, pool } = pass;
  if (!spec?.database) return;
  const pipeline = pipelineOf(spec.queue);
  // (Redis unreachable at the last poll: the next good poll re-checks the pool)
  if (state.recordsOn === pipeline || pass.sample?.error) return;
  let switched: boolean | undefined;
  try {
    switched = await deps.poller.enableRecords(pass.key);
  } catch (err) {
    deps.ctx.log.warn({ pool: pass.key, pipeline, err: String(err) }, "cannot switch job records on yet");
    pass.result = Result.sooner(pass.result, Result.requeueAfter(RECORDS_RETRY_MS));
    return;
  }
  if (switched === undefined) return; // not polled: its Redis Secret is the problem reported
  state.recordsOn = pipeline;
  if (!switched) return;
  deps.ctx.log.info({ pool: pass.key, pipeline }, "job records switched on for the pool's pipeline");
  await deps.poller
    .audit(
      pass.key,
      {
        verb: "admin",
        operation: "recordsEnable",
        target: `pipeline:${pipeline}`,
        params: { database: "spec.database" },
      },
      { status: 200, jobs: null, result: { switched: true } },
    )
    .catch((err: unknown) =>
      deps.ctx.log.warn({ pool: pass.key, err: String(err) }, "audit: records enable was not written"),
    );
  await deps.ctx.events.record(
    pool,
    "Normal",
    Reason.RecordsOn,
    `job records switched on for pipeline ${pipeline}: every job is recorded from its enqueue (spec.database)`,
  );
}
