// The run behind `make demo` on a real node, as a test (smaller burst): the chart installed with
// helm — the operator and the job API as real pods reaching the API server from the node — a
// two-stage pipeline scaling 0 → N → 0 with real worker pods, every job once per stage, every
// worker container exiting 0 as the kubelet reports, the dashboard reached through `kubectl
// port-forward`, and the host as it was.
import assert from "node:assert/strict";
import { test } from "node:test";
import { nodeUnavailable } from "../support/node.ts";
import { runNodeScenario } from "./nodeScenario.ts";
import { assertStages, POOLS } from "./scenario.ts";

const skip = nodeUnavailable();

test(
  "make demo on a real node: helm install, both pools 0 → N → 0 with real pods, the dashboard through kubectl port-forward",
  { skip, timeout: 20 * 60_000 },
  async () => {
    const jobs = 400;
    let reached:
      | { healthz: number; page: string; queue: { completed?: number } | undefined; pools: string[] }
      | undefined;
    const report = await runNodeScenario({
      jobs,
      jobMs: 100,
      say: (line) => console.log(line),
      // while everything still runs: the job API's Service through kubectl port-forward
      beforeStop: async (d) => {
        const auth = { headers: { authorization: `Bearer ${d.token}` } };
        const last = POOLS[POOLS.length - 1]!;
        const healthz = (await fetch(`${d.url}/healthz`)).status;
        const page = await (await fetch(`${d.url}/`)).text();
        const queue = (await (
          await fetch(`${d.url}/queues/${encodeURIComponent(last.queue)}`, auth)
        ).json()) as {
          completed?: number;
        };
        const unauthorized = (await fetch(`${d.url}/queues/${encodeURIComponent(last.queue)}`)).status;
        assert.equal(unauthorized, 401, "the job API asks for the token");
        // the job API pod reads WorkerPools from the API server (jobApi.pools.enabled)
        const pools = (await (await fetch(`${d.url}/pools`, auth)).json()) as { pools?: { name: string }[] };
        reached = { healthz, page, queue, pools: (pools.pools ?? []).map((p) => p.name).sort() };
      },
    });
    assert.ok(reached, "the dashboard was reached");
    assert.equal(reached.healthz, 200, "GET /healthz through kubectl port-forward");
    assert.match(reached.page, /<html/i, "the dashboard's page through kubectl port-forward");
    assert.equal(
      reached.queue?.completed,
      jobs,
      `the job API counts ${jobs} completed: ${JSON.stringify(reached.queue)}`,
    );
    assert.deepEqual(
      reached.pools,
      POOLS.map((p) => p.name).sort(),
      "the Pools page's data, read by the job API pod",
    );
    assertStages(report.stages, jobs);
    const workers = report.pods.filter((p) => p.pool);
    assert.ok(workers.length >= 4, `worker pods ran: ${workers.length}`);
    assert.deepEqual(
      workers
        .filter((p) => p.toRunningMs !== undefined && p.exitCode !== 0)
        .filter((p) => !(p.toReadyMs === undefined && p.exitCode === 143))
        .map((p) => `${p.name}: ${p.exitCode}`),
      [],
      "every worker container that became Ready exited 0 as the kubelet reported",
    );
    for (const l of report.logLines.lines) assert.doesNotThrow(() => JSON.parse(l), `a JSON log line: ${l}`);
    assert.ok(report.logLines.lines.length > 0, "kubectl logs showed a worker's lines");
    assert.match(report.getWp, /demo-extract/);
    assert.equal(
      report.records,
      jobs,
      "every job's record reached PostgreSQL, from its enqueue (created_at and data) on",
    );
    assert.deepEqual(report.footprint, [], "host unchanged after the run");
  },
);
