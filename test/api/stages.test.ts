// A pipeline job's stages and attempts as GET /jobs/{id} and `conveyor job` give them, against
// real Redis, PostgreSQL records, workers and `conveyor api`: a stage that failed once and then
// succeeded counts 2 attempts and shows no error, each stage keeps its result, and a queue no
// worker ever served says so.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { Producer } from "../../queue/index.ts";
import { DashboardStack } from "../support/dashboard.ts";
import { waitFor } from "../support/processes.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

const A = "flow/a";
const B = "flow/b";
const TYPO = "flow/extrct"; // no worker serves it

interface Stage {
  queue: string;
  state: string;
  attempts: number;
  result?: unknown;
  error?: unknown;
  startedAt?: string;
  finishedAt?: string;
}

describe("a pipeline job's stages", () => {
  let s: DashboardStack;
  let producer: Producer;
  const get = async (path: string) => {
    const res = await fetch(`${s.api.base}${path}`, { headers: { authorization: `Bearer ${s.token}` } });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const conveyor = async (...args: string[]) => {
    const r = await promisify(execFile)(NODE, [CONVEYOR, ...args], {
      env: { ...process.env, REDIS_URL: s.redisServer.url, DATABASE_URL: "" },
    });
    return r.stdout;
  };
  /** The parts of a stage that do not depend on the clock. */
  const plain = (st: Stage[]) =>
    st.map(({ queue, state, attempts, result, error }) => ({ queue, state, attempts, result, error }));

  before(async () => {
    s = await DashboardStack.start({ queues: [A, B], next: { [A]: B } });
    producer = new Producer(s.redis);
    // Stage a fails its first attempt, then hands {from: "a"} to stage b.
    await producer.enqueue(A, { failTimes: 1, result: { from: "a" } }, { id: "doc-1", attempts: 3 });
    await producer.enqueue(TYPO, { n: 1 }, { id: "lost-1" });
    await s.recorded("id = $1 AND queue = $2 AND state = 'completed'", ["doc-1", B]);
  });
  after(async () => {
    await s?.stop();
  });

  test("GET /jobs/{id}: each stage's attempts and result; the retried stage shows 2 attempts and no error", async () => {
    const expected = [
      { queue: A, state: "completed", attempts: 2, result: { from: "a" }, error: undefined },
      { queue: B, state: "completed", attempts: 1, result: { ok: "doc-1", attempt: 1 }, error: undefined },
    ];
    const r = await get(`/jobs/doc-1`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual([r.body.state, r.body.attempts, r.body.error], ["completed", 1, null]);
    const stages = r.body.stages as Stage[];
    assert.deepEqual(plain(stages), expected);
    for (const st of stages) assert.ok(st.startedAt && st.finishedAt, `${st.queue}: times from the records`);

    const d = await get(`/jobs/doc-1/detail`);
    assert.equal(d.status, 200, JSON.stringify(d.body));
    assert.equal(d.body.error, null, "a job that succeeded shows no error");
    assert.deepEqual(
      (d.body.stages as { queue: string; attempts: number; result: { value: unknown } | null }[]).map(
        (st) => [st.queue, st.attempts, st.result?.value],
      ),
      expected.map((st) => [st.queue, st.attempts, st.result]),
    );
    const executions = d.body.executions as { queue: string; outcome: string; error: string | null }[];
    assert.deepEqual(
      executions.map((e) => [e.queue, e.outcome]),
      [
        [A, "retried"],
        [A, "completed"],
        [B, "completed"],
      ],
    );
    assert.match(executions[0]!.error ?? "", /planned failure 1/, "the history keeps the failure");
  });

  test("conveyor job --json: the same stages, results from the records with --database", async () => {
    const withRecords = JSON.parse(await conveyor("job", "doc-1", "--json", "--database", s.pg.url)) as {
      attempts: number;
      error?: unknown;
      stages: Stage[];
      warning?: string;
    };
    assert.equal(withRecords.attempts, 1);
    assert.equal(withRecords.error, undefined);
    assert.equal(withRecords.warning, undefined);
    assert.deepEqual(plain(withRecords.stages), [
      { queue: A, state: "completed", attempts: 2, result: { from: "a" }, error: undefined },
      { queue: B, state: "completed", attempts: 1, result: { ok: "doc-1", attempt: 1 }, error: undefined },
    ]);
    // Without the records: Redis keeps an earlier stage's attempts, not its result.
    const live = JSON.parse(await conveyor("job", "doc-1", "--json")) as { stages: Stage[] };
    assert.deepEqual(plain(live.stages), [
      { queue: A, state: "completed", attempts: 2, result: undefined, error: undefined },
      { queue: B, state: "completed", attempts: 1, result: { ok: "doc-1", attempt: 1 }, error: undefined },
    ]);
    const text = await conveyor("job", "doc-1", "--database", s.pg.url);
    assert.match(text, /flow\/a: completed, attempts 2, result \{"from":"a"\}/);
  });

  test("a queue no worker ever claimed from says so: stats, job and the queue API", async () => {
    assert.match(await conveyor("stats", TYPO), /warning: no worker has claimed from this queue/);
    assert.doesNotMatch(await conveyor("stats", A), /warning/);
    assert.match(await conveyor("job", "lost-1"), /warning: no worker has claimed from this queue/);
    assert.equal(
      (JSON.parse(await conveyor("job", "lost-1", "--json")) as { warning?: string }).warning,
      "no worker has claimed from this queue",
    );
    const typo = await get(`/queues/${encodeURIComponent(TYPO)}`);
    assert.equal(typo.body.served, false);
    await waitFor(
      "stage a's worker seen",
      async () => (await get(`/queues/${encodeURIComponent(A)}`)).body.served === true,
    );
  });
});
