// GET /flows/{id} against real Redis, PostgreSQL records, workers and `conveyor api`: a diamond
// flow (a → b, c → d) while it runs and once it ended, an unknown id, a bad query parameter, the
// records' view once Redis has let the flow go, and `flow:<id>` in the search.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { PipelineKeys, Producer, QueueKeys } from "../../queue/index.ts";
import { DashboardStack } from "../support/dashboard.ts";
import { waitFor } from "../support/processes.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

const P = "dia";
const [A, B, D] = [`${P}/a`, `${P}/b`, `${P}/d`];

interface FlowJob {
  key: string;
  id: string;
  queue: string;
  state: string;
  parents: string[];
  onParentFailure: string;
  pending?: number;
  reason?: string;
}
interface FlowBody {
  id: string;
  pipeline: string;
  createdAt: string | null;
  source: string;
  counts: Record<string, number>;
  jobs: FlowJob[];
}

describe("GET /flows/{id}", () => {
  let s: DashboardStack;
  let producer: Producer;
  let flowId = "";
  let ids: Record<string, string> = {};
  const gate = (name: string) => join(s.dir, `release-${name}`);
  const get = async (path: string) => {
    const res = await fetch(`${s.api.base}${path}`, { headers: { authorization: `Bearer ${s.token}` } });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const flow = async (id = flowId) => {
    const r = await get(`/flows/${id}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body as unknown as FlowBody;
  };
  const states = (f: FlowBody) => Object.fromEntries(f.jobs.map((j) => [j.key, j.state]));

  before(async () => {
    s = await DashboardStack.start({ queues: [A, B, D] });
    producer = new Producer(s.redis);
    // Each job runs until the test creates its gate file.
    ({ flowId, ids } = await producer.enqueueFlow(P, [
      { key: "a", queue: A, data: { untilFile: gate("a"), result: { a: 1 } } },
      { key: "b", queue: B, data: { untilFile: gate("b") }, parents: ["a"] },
      { key: "c", queue: B, data: { untilFile: gate("c") }, parents: ["a"], onParentFailure: "continue" },
      { key: "d", queue: D, data: { untilFile: gate("d") }, parents: ["b", "c"], onParentFailure: "ignore" },
    ]));
  });
  after(async () => {
    await s?.stop();
  });

  test("while it runs: each job's key, id, queue, state, parents and policy, counts by state", async () => {
    await waitFor("a running", async () => (await flow()).jobs[0]!.state === "active");
    const f = await flow();
    assert.equal(f.source, "redis");
    assert.deepEqual([f.id, f.pipeline], [flowId, P]);
    assert.ok(f.createdAt && Date.parse(f.createdAt) > 0);
    assert.deepEqual(f.counts, { active: 1, "waiting-children": 3 });
    assert.deepEqual(f.jobs, [
      { key: "a", id: ids.a, queue: A, state: "active", parents: [], onParentFailure: "fail" },
      {
        key: "b",
        id: ids.b,
        queue: B,
        state: "waiting-children",
        parents: ["a"],
        onParentFailure: "fail",
        pending: 1,
      },
      {
        key: "c",
        id: ids.c,
        queue: B,
        state: "waiting-children",
        parents: ["a"],
        onParentFailure: "continue",
        pending: 1,
      },
      {
        key: "d",
        id: ids.d,
        queue: D,
        state: "waiting-children",
        parents: ["b", "c"],
        onParentFailure: "ignore",
        pending: 2,
      },
    ]);

    const detail = await get(`/jobs/${ids.b}/detail`);
    assert.deepEqual(detail.body.flow, { id: flowId, key: "b" }, "a job's page links to its flow");

    writeFileSync(gate("a"), "");
    await waitFor("b and c running", async () => {
      const st = states(await flow());
      return st.b === "active" && st.c === "active";
    });
    const mid = await flow();
    assert.deepEqual(mid.counts, { completed: 1, active: 2, "waiting-children": 1 });
    assert.equal(mid.jobs[3]!.pending, 2);

    for (const k of ["b", "c", "d"]) writeFileSync(gate(k), "");
    await waitFor("the flow completed", async () => (await flow()).counts.completed === 4);
  });

  test("an unknown flow is a 404 naming its id; a bad id or query parameter a 400 naming it", async () => {
    const r = await get("/flows/no-such-flow");
    assert.equal(r.status, 404);
    assert.match(String(r.body.error), /flow no-such-flow not found/);
    const inOther = await get(`/flows/${flowId}?pipeline=other`);
    assert.equal(inOther.status, 404);
    assert.match(String(inOther.body.error), new RegExp(`flow ${flowId} not found in pipeline other`));
    const bad = await get(`/flows/${flowId}?pipeline=a%2Fb`);
    assert.deepEqual([bad.status, bad.body.field], [400, "query.pipeline"]);
    const unknown = await get(`/flows/${flowId}?pipline=${P}`);
    assert.deepEqual([unknown.status, unknown.body.field], [400, "query.pipline"]);
    assert.match(String(unknown.body.error), /pipline/);
    const badId = await get("/flows/a%20b");
    assert.deepEqual([badId.status, badId.body.field], [400, "path.id"]);
  });

  test("once Redis has let the flow go: from the records, with parents and policies; flow:<id> finds its jobs", async () => {
    await s.recorded("flow_id = $1 AND state = 'completed' AND flow_key = 'd'", [flowId]);
    await waitFor(
      "all four recorded completed",
      async () =>
        (
          await s.pg.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM conveyor_jobs WHERE flow_id = $1 AND state = 'completed'",
            [flowId],
          )
        )[0]!.n === 4,
    );
    // What the flow's retention does, at once: the flow's hash and its jobs' records leave Redis.
    const keys = new PipelineKeys(P);
    await s.redis.del(keys.flow(flowId), ...Object.values(ids).map((id) => keys.job(id)));

    const f = await flow();
    assert.equal(f.source, "records");
    assert.deepEqual([f.id, f.pipeline], [flowId, P]);
    assert.ok(f.createdAt && Date.parse(f.createdAt) > 0);
    assert.deepEqual(f.counts, { completed: 4 });
    assert.deepEqual(f.jobs, [
      { key: "a", id: ids.a, queue: A, state: "completed", parents: [], onParentFailure: "fail" },
      { key: "b", id: ids.b, queue: B, state: "completed", parents: ["a"], onParentFailure: "fail" },
      { key: "c", id: ids.c, queue: B, state: "completed", parents: ["a"], onParentFailure: "continue" },
      { key: "d", id: ids.d, queue: D, state: "completed", parents: ["b", "c"], onParentFailure: "ignore" },
    ]);
    const parentIds = await s.pg.query<{ ids: string }>(
      "SELECT flow_parent_ids AS ids FROM conveyor_jobs WHERE flow_id = $1 AND flow_key = 'd'",
      [flowId],
    );
    assert.equal(parentIds[0]!.ids, `${ids.b} ${ids.c}`);

    // `conveyor flow` reads the same: Redis, then the records with --database.
    const cli = (...args: string[]) =>
      spawnSync(NODE, [CONVEYOR, "flow", flowId, ...args], {
        encoding: "utf8",
        env: { ...process.env, REDIS_URL: s.redisServer.url, DATABASE_URL: "" },
      });
    const gone = cli("--json");
    assert.deepEqual([gone.status, gone.stdout.trim()], [1, "null"], gone.stderr);
    const recorded = cli("--json", "--database", s.pg.url);
    assert.equal(recorded.status, 0, recorded.stderr);
    const view = JSON.parse(recorded.stdout) as FlowBody & { createdAt: number };
    assert.equal(view.source, "records");
    assert.deepEqual(view.jobs, f.jobs);
    assert.deepEqual(view.counts, f.counts);
    const text = cli("--database", s.pg.url);
    assert.match(text.stdout, /from the records: Redis has let it go/);
    assert.match(text.stdout, new RegExp(`d  completed  ${D}  ${ids.d} ← b, c`));

    const detail = await get(`/jobs/${ids.d}/detail?queue=${D}`);
    assert.deepEqual(detail.body.flow, { id: flowId, key: "d" }, "from the records");

    // The parents go to the outbox for the records; followers of the event stream do not get them.
    const events = await s.redis.xrange(new QueueKeys(D).events, "-", "+");
    const enqueued = events.map(([, f]) => f).find((f) => f[1] === "enqueued" && f[3] === ids.d);
    assert.ok(enqueued, "d's enqueue event");
    const names = enqueued.filter((_, i) => i % 2 === 0);
    for (const name of ["flow", "flowKey", "parents", "parentIds", "data"])
      assert.ok(!names.includes(name), name);

    const found = await get(`/search?q=${encodeURIComponent(`flow:${flowId}`)}`);
    assert.equal(found.status, 200, JSON.stringify(found.body));
    assert.equal(found.body.kind, "flow");
    assert.deepEqual(
      (found.body.items as { id: string; matched: string; state: string }[]).map((h) => [
        h.id,
        h.matched,
        h.state,
      ]),
      ["a", "b", "c", "d"].map((k) => [ids[k], "flow", "completed"]),
    );
  });
});
