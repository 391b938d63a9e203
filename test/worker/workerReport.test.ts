// A worker's report (workers hash: slots, busy, pod) is in Redis before its first claim, so no
// job is ever in flight on a worker nobody can see: the dashboard's Workers column and the
// operator's scale-in choice (which pods are busy) count it from its first job. Checked on the
// order of the commands Redis ran (MONITOR), not by sampling.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Redis } from "ioredis";
import { QueueKeys } from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import { WorkerTestBed } from "../support/testbed.ts";

const Q = "reports/first";

describe("a worker's report and its first claim", () => {
  const bed = new WorkerTestBed("report");
  before(() => bed.start());
  after(() => bed.stop());

  test("the report is written before the worker claims its first job", async () => {
    for (let i = 0; i < 40; i++) await bed.producer.enqueue(Q, { sleepMs: 200 });
    const k = new QueueKeys(Q);
    const commands: string[][] = [];
    const client = new Redis(bed.server.url);
    const monitor = await client.monitor();
    monitor.on("monitor", (_time: string, args: string[]) => commands.push(args));
    try {
      await bed.worker(Q, { CONVEYOR_CONCURRENCY: "8" });
      await waitFor("a job completed", async () => (await bed.admin.counts(Q)).completed > 0, 30_000);
    } finally {
      monitor.disconnect();
      client.disconnect();
    }
    const firstClaim = commands.findIndex((c) => c[0]?.toLowerCase() === "zadd" && c[1] === k.inflight);
    const firstReport = commands.findIndex((c) => c[0]?.toLowerCase() === "hset" && c[1] === k.workers);
    assert.ok(firstClaim >= 0, "the worker claimed");
    assert.ok(firstReport >= 0, "the worker reported");
    assert.ok(
      firstReport < firstClaim,
      `report (command ${firstReport}) before the first claim (command ${firstClaim})`,
    );
  });
});
