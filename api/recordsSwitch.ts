// With a database the job API records the pipelines it serves: job records are switched on for
// a pipeline (queue/records.ts) before the API's first enqueue into it, and at start for the
// pipelines of `--queues` — so no job it accepts misses its `enqueued` record because no worker
// with a database has started yet (docs/records.md, "When records switch on").
import type { Logger } from "pino";
import { enableRecords, pipelineOf, type RedisClient } from "../queue/index.ts";

export class RecordsSwitch {
  /** Per pipeline: switched on (or being switched on) by this process; a failure is forgotten. */
  private readonly on = new Map<string, Promise<void>>();
  private readonly redis: RedisClient;
  private readonly log?: Logger;

  constructor(redis: RedisClient, log?: Logger) {
    this.redis = redis;
    this.log = log;
  }

  /**
   * Records on for the pipeline of `queue`: one script call the first time, nothing after. Never
   * rejects: a failure is logged and tried again at the next call (an enqueue does not wait
   * for records, like it never waits for PostgreSQL).
   */
  ensure(queue: string): Promise<void> {
    const pipeline = pipelineOf(queue);
    let done = this.on.get(pipeline);
    if (!done) {
      done = enableRecords(this.redis, pipeline).then(
        (switched) => {
          if (switched) this.log?.info({ pipeline }, "job records switched on for the pipeline");
        },
        (err: unknown) => {
          this.on.delete(pipeline);
          this.log?.warn({ pipeline, err: (err as Error).message }, "job records: cannot switch them on");
        },
      );
      this.on.set(pipeline, done);
    }
    return done;
  }
}
