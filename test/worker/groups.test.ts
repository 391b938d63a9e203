// Per-group concurrency with real worker processes: 6 `conveyor worker` processes share a queue
// whose groups have limits; an independent recorder (the handler appends start and end times to
// a file of its own) shows no group ever ran more jobs at once than its limit — also while two
// workers are SIGKILLed mid-run and their leases wait to be swept.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setGroupLimit } from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import { WorkerTestBed } from "../support/testbed.ts";
import { REPO, type WorkerProcess } from "../support/workers.ts";

const INTERVAL_HANDLER = `module:${join(REPO, "test/fixtures/intervalHandler.js")}`;

interface Mark {
  g: string;
  id: string;
  exec: string;
  ev: "start" | "end";
  pid: number;
  t: number;
}

function readMarks(file: string): Mark[] {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter((l) => l !== "")
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as Mark];
      } catch {
        return []; // a line cut short by a SIGKILL
      }
    });
}

/**
 * The most executions of each group that overlapped. An execution without an end (its worker was
 * SIGKILLed) is taken to last until the same job started again — after the sweep freed its lease
 * — which is at least as long as its lease held the group's slot.
 */
function maxOverlap(marks: Mark[]): Map<string, number> {
  const starts = marks.filter((m) => m.ev === "start").sort((a, b) => a.t - b.t);
  const ends = new Map(marks.filter((m) => m.ev === "end").map((m) => [m.exec, m.t]));
  const points: { g: string; t: number; d: number }[] = [];
  for (const s of starts) {
    let end = ends.get(s.exec);
    if (end === undefined) {
      const rerun = starts.find((o) => o.id === s.id && o.t >= s.t && o.exec !== s.exec);
      end = rerun?.t ?? Number.POSITIVE_INFINITY;
    }
    points.push({ g: s.g, t: s.t, d: 1 }, { g: s.g, t: end, d: -1 });
  }
  // (an end and a start at the same millisecond: the end first — the slot was free)
  points.sort((a, b) => a.t - b.t || a.d - b.d);
  const now = new Map<string, number>();
  const max = new Map<string, number>();
  for (const p of points) {
    const n = (now.get(p.g) ?? 0) + p.d;
    now.set(p.g, n);
    max.set(p.g, Math.max(max.get(p.g) ?? 0, n));
  }
  return max;
}

describe("groups across worker processes", () => {
  const bed = new WorkerTestBed("grp");
  before(() => bed.start());
  after(() => bed.stop());

  test("6 workers, 2 of them SIGKILLed mid-run: no group ever runs more than its limit; every job completes", async () => {
    const q = "tenants";
    const log = join(bed.dir, "intervals.ndjson");
    const limits: Record<string, number> = { g0: 1, g1: 2, g2: 2, g3: 3 };
    await setGroupLimit(bed.redis, q, undefined, { concurrency: 2 });
    await setGroupLimit(bed.redis, q, "g0", { concurrency: 1 });
    await setGroupLimit(bed.redis, q, "g3", { concurrency: 3 });
    const env = {
      CONVEYOR_HANDLER: INTERVAL_HANDLER,
      INTERVAL_LOG: log,
      CONVEYOR_CONCURRENCY: "4",
      CONVEYOR_LEASE: "1s",
      LOG_LEVEL: "warn",
    };
    const workers: WorkerProcess[] = [];
    for (let i = 0; i < 6; i++) workers.push(await bed.worker(q, env));
    const perGroup = 25;
    await bed.producer.enqueueMany(
      q,
      Object.keys(limits).flatMap((g) =>
        Array.from({ length: perGroup }, (_, i) => ({
          id: `${g}-${i}`,
          data: { g, sleepMs: i % 5 === 0 ? 600 : 60 },
          group: g,
        })),
      ),
    );
    const total = perGroup * Object.keys(limits).length;
    await waitFor("a quarter done", async () => (await bed.admin.counts(q)).completed >= total / 4, 120_000);
    // kill two workers while they run jobs (their leases hold group slots until swept): whichever
    // two hold jobs then (with 8 group slots for 24 worker slots, which ones do is up to the race)
    const doomed = await waitFor(
      "two workers running jobs",
      async () => {
        const marks = readMarks(log);
        const ended = new Set(marks.filter((m) => m.ev === "end").map((m) => m.exec));
        const busy = new Set(marks.filter((m) => m.ev === "start" && !ended.has(m.exec)).map((m) => m.pid));
        const victims = workers.filter((w) => busy.has(w.child.pid!)).slice(0, 2);
        return victims.length === 2 && victims;
      },
      60_000,
      5,
    );
    for (const w of doomed) w.signal("SIGKILL");
    await Promise.all(doomed.map((w) => w.exited));
    const done = await waitFor(
      "every job completed",
      async () => {
        const c = await bed.admin.counts(q);
        return c.completed >= total && c.backlog === 0 ? c : null;
      },
      180_000,
      100,
    );
    assert.equal(done.completed, total);
    const marks = readMarks(log);
    const max = maxOverlap(marks);
    for (const [g, limit] of Object.entries(limits)) {
      assert.ok((max.get(g) ?? 0) <= limit, `group ${g} ran ${max.get(g)} at once, limit ${limit}`);
    }
    // the limits were reached, so the check above could fail
    assert.equal(max.get("g3"), 3, `g3 reached ${max.get("g3")}`);
    const completedIds = new Set(marks.filter((m) => m.ev === "end").map((m) => m.id));
    assert.equal(completedIds.size, total);
    // the killed workers' jobs were swept (counted as stalls) and run again
    const counters = await bed.admin.counters(q);
    assert.ok(counters.stalled! >= 1, `stalled ${counters.stalled}`);
  });
});
