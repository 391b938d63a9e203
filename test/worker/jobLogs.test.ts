// Job logs from a module handler (ctx.log) on real Redis with real worker processes: written by
// the fenced append_log script, capped, expiring, readable through QueueAdmin.jobLogs and
// `conveyor job`; a job that does not log has no log key.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { Consumer, JOB_LOG_MAX_LINES, type QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { CONVEYOR, NODE, REPO } from "../support/workers.ts";

describe("job logs", () => {
  const bed = new WorkerTestBed("logs");
  let redis: RedisClient;
  let admin: QueueAdmin;
  before(async () => {
    await bed.start();
    ({ redis, admin } = bed);
  });
  after(() => bed.stop());

  const finished = (id: string) =>
    waitFor(`job ${id} finished`, async () => {
      const job = await admin.job(id);
      return job && (job.state === "completed" || job.state === "dead") ? job : null;
    });

  test("ctx.log lines are kept per job, across attempts, capped, with a TTL", async () => {
    const w = await bed.worker("docs/ocr", { CONVEYOR_RETENTION_SECONDS: "600" });
    await bed.producer.enqueue("docs/ocr", { logLines: 3, failTimes: 1 }, { id: "l1" });
    await bed.producer.enqueue("docs/ocr", { logLines: JOB_LOG_MAX_LINES + 50 }, { id: "l2" });
    await bed.producer.enqueue("docs/ocr", {}, { id: "quiet" });
    for (const id of ["l1", "l2", "quiet"]) assert.equal((await finished(id)).state, "completed");

    const l1 = await admin.jobLogs("l1");
    assert.deepEqual(
      l1.map((l) => l.message),
      [1, 2, 3].map((i) => `line ${i} of attempt 1`).concat([1, 2, 3].map((i) => `line ${i} of attempt 2`)),
    );
    assert.equal(new Set(l1.map((l) => l.executionId)).size, 2, "each attempt's lines name its execution");
    const ttl = await redis.ttl("cvy:{docs}:logs:l1");
    assert.ok(ttl > 600 && ttl <= 600 + 300, `log TTL is the job timeout + retention, got ${ttl}`);

    const l2 = await admin.jobLogs("l2", "docs/ocr");
    assert.equal(l2.length, JOB_LOG_MAX_LINES);
    assert.equal(l2[0]!.message, "line 51 of attempt 1", "the oldest lines are dropped");
    assert.equal(await redis.exists("cvy:{docs}:logs:quiet"), 0, "no key for a job that never logged");
    assert.deepEqual(await admin.jobLogs("quiet"), []);
    assert.match(w.logs(), /wrote job log lines/, "ctx.log.info still logs to stdout");

    const shown = execFileSync(NODE, [CONVEYOR, "job", "l1", "--redis", bed.server.url], {
      cwd: REPO,
    }).toString();
    assert.match(shown, /log \(last 6 lines\):/);
    assert.match(shown, /line 3 of attempt 2/);
  });

  test("append_log is fenced: only the lease holder writes", async () => {
    const consumer = new Consumer(redis, "fenced", { workerId: "t", leaseMs: 30_000 });
    await bed.producer.enqueue("fenced", {}, { id: "f1" });
    const [job] = (await consumer.claim(1)).jobs;
    assert.ok(job);
    assert.equal(await consumer.appendLog(job, "mine", 60), true);
    assert.equal(await consumer.appendLog({ id: "f1", token: "999" }, "not mine", 60), false);
    assert.equal(await consumer.appendLog({ id: "nope", token: job.token }, "no job", 60), false);
    assert.deepEqual(
      (await admin.jobLogs("f1")).map((l) => l.message),
      ["mine"],
    );
  });
});
