import assert from "node:assert/strict";
import { test } from "node:test";
import {
  idealWaits,
  renderReplicasSvg,
  renderVersus,
  renderTable,
  replicaSecondsToLastStart,
  summarizeRun,
  type RunInput,
} from "./report.ts";

const t0 = 1_000_000;
const run = (over: Partial<RunInput> = {}): RunInput => ({
  arm: "a",
  workload: "burst",
  t0,
  windowMs: 10_000,
  endMs: t0 + 10_000,
  enqueuedAt: new Map([
    ["j1", t0],
    ["j2", t0],
    ["j3", t0 + 2000],
  ]),
  executions: [
    { id: "j1", t: t0 + 4000, attempt: 1 },
    { id: "j2", t: t0 + 5000, attempt: 1 },
    { id: "j2", t: t0 + 9000, attempt: 2 },
    { id: "j3", t: t0 + 8000, attempt: 1 },
    { id: "other", t: t0, attempt: 1 },
  ],
  samples: [
    { t: 0, desired: 0, pods: 0 },
    { t: 2, desired: 2, pods: 0 },
    { t: 4, desired: 2, pods: 2 },
    { t: 8, desired: 1, pods: 2 },
  ],
  handedBack: 1,
  stalled: 0,
  ...over,
});

test("summarizeRun: waits from enqueue to first start, first start after idle, pod-seconds, re-runs", () => {
  const s = summarizeRun(run());
  assert.equal(s.jobs, 3);
  assert.equal(s.started, 3);
  assert.equal(s.waitP50S, 5); // waits 4, 5, 6 s (j2's first start counts)
  assert.equal(s.waitP95S, 6);
  assert.equal(s.waitMaxS, 6);
  assert.equal(s.firstStartS, 4);
  assert.equal(s.lastStartS, 8);
  assert.equal(s.podSeconds, 2 * 4 + 2 * 2); // 2 pods from 4 to 8 s, then to the end at 10 s
  assert.equal(s.maxReplicas, 2);
  assert.equal(s.ranTwice, 1);
  assert.equal(s.handedBack, 1);
  assert.equal(s.unstartedAtWindowEnd, 0);
  assert.deepEqual(s.replicas, [
    [0, 0],
    [2, 2],
    [8, 1],
  ]);
});

test("summarizeRun: the first start is counted from the first enqueue, not from the trace's start", () => {
  const s = summarizeRun(
    run({ enqueuedAt: new Map([["j3", t0 + 2000]]), executions: [{ id: "j3", t: t0 + 8000, attempt: 1 }] }),
  );
  assert.equal(s.firstStartS, 6);
});

test("replicaSecondsToLastStart: desired replicas integrated until the last start", () => {
  // 0 until 2 s, 2 until 8 s (last start at 8 s): 12
  assert.equal(replicaSecondsToLastStart(summarizeRun(run())), 12);
  assert.equal(replicaSecondsToLastStart(summarizeRun(run({ executions: [] }))), null);
});

test("summarizeRun: jobs not started in the window are counted; no start at all gives no first start", () => {
  const late = summarizeRun(run({ windowMs: 6000 }));
  assert.equal(late.unstartedAtWindowEnd, 1);
  const none = summarizeRun(run({ executions: [] }));
  assert.equal(none.started, 0);
  assert.equal(none.firstStartS, null);
  assert.equal(none.waitP95S, 0);
});

test("renderReplicasSvg: one step line and one legend entry per arm; renderTable: one row per arm", () => {
  const a = summarizeRun(run());
  const b = summarizeRun(run({ arm: "b<&>" }));
  const svg = renderReplicasSvg("burst", "3 jobs", [a, b]);
  assert.equal(svg.match(/<polyline /g)?.length, 2);
  assert.match(svg, /b&lt;&amp;&gt;/);
  assert.ok(svg.startsWith("<svg ") && svg.trimEnd().endsWith("</svg>"));
  assert.equal(renderTable([a, b]).split("\n").length, 4);
});

test("idealWaits: every slot ready at once, FIFO, none before a resume", () => {
  // 5 jobs of 1 s at 0 on 2 slots: starts 0, 0, 1, 1, 2
  const burst = Array.from({ length: 5 }, () => ({ at: 0, sleepMs: 1000 }));
  assert.deepEqual(idealWaits(burst, 2), { slots: 2, p50S: 1, p95S: 2, maxS: 2 });
  // arrivals slower than the slots drain wait for nothing
  assert.equal(
    idealWaits(
      [
        { at: 0, sleepMs: 500 },
        { at: 1000, sleepMs: 500 },
      ],
      1,
    ).maxS,
    0,
  );
  // resumed at 3 s: the job enqueued at 1 s waits 2 s
  assert.deepEqual(idealWaits([{ at: 1000, sleepMs: 100 }], 4, 3000), {
    slots: 4,
    p50S: 2,
    p95S: 2,
    maxS: 2,
  });
});

test("renderVersus: each Conveyor arm against KEDA tuned, p95 above the floor, no ratio on a zero base", () => {
  const base = summarizeRun(run());
  const runs = [
    { ...base, arm: "keda-tuned", waitP95S: 10, podSeconds: 100, firstStartS: 5 },
    { ...base, arm: "conveyor-backlog", waitP95S: 6, podSeconds: 80, firstStartS: 1.5 },
  ];
  const md = renderVersus([{ name: "burst", runs, floor: { slots: 80, p50S: 1, p95S: 2, maxS: 3 } }]);
  assert.match(
    md,
    /\| burst \| conveyor-backlog \| 6 vs 10 = 0\.60 \| 4 vs 8 = 0\.50 \| 80 vs 100 = 0\.80 \| 1\.5 vs 5 \|/,
  );
  assert.doesNotMatch(md, /\| keda-tuned \|/, "no row for KEDA itself");
  const flat = renderVersus([{ name: "paused", runs, floor: { slots: 80, p50S: 1, p95S: 10, maxS: 11 } }]);
  assert.match(flat, /0 vs 0 = –/);
  assert.equal(renderVersus([{ name: "burst", runs: runs.slice(1) }]), "", "nothing without KEDA's arm");
});
