// A rate limit where the downstream API counts it: the most handler starts in any window of the
// limit, with the queue limited to 10/s and two `conveyor worker` processes of 8 slots running
// 5 ms jobs — as they share the machine's clock, with one worker's clock off by --offset-ms, and
// with every claim held --pause-ms in Redis (CLIENT PAUSE WRITE) just before the second window.
// Per run also the jobs handed back unstarted (their claim came back past the start slack) and
// the starts per second. Then the first batch of a freshly started worker: from its claim to each
// handler's first line.
//   node bench/rateWindow.ts [--jobs 200] [--reps 3] [--offset-ms 400] [--pause-ms 300] [--json]
import { fullestWindow, firstBatchLatency, runRateScenario } from "../test/support/rateWindow.ts";
import { WorkerTestBed } from "../test/support/testbed.ts";
import { intFlag, loadAverage, cliFlags, progress, runMain } from "./lib/util.ts";

runMain("rateWindow", async () => {
  const flags = cliFlags(["jobs", "json", "offset-ms", "pause-ms", "reps"]);
  const jobs = intFlag(flags, "jobs", 200);
  const reps = intFlag(flags, "reps", 3);
  const offsetMs = intFlag(flags, "offset-ms", 400);
  const pauseMs = intFlag(flags, "pause-ms", 300);
  const limit = { max: 10, perMs: 1000 };
  const variants = [
    { name: "same clock", offsetMs: 0, pauseMs: 0 },
    { name: `clock +${offsetMs} ms`, offsetMs, pauseMs: 0 },
    { name: `claims held ${pauseMs} ms`, offsetMs: 0, pauseMs },
  ];
  const rows = [];
  const bed = new WorkerTestBed("ratewindow");
  await bed.start();
  try {
    for (let rep = 1; rep <= reps; rep++) {
      for (const v of variants) {
        const q = `rw-${rep}-${v.offsetMs}-${v.pauseMs}`;
        const r = await runRateScenario(bed, q, {
          jobs,
          workers: 2,
          concurrency: 8,
          limit,
          sleepMs: 5,
          ...v,
        });
        const firstSecond = r.starts.filter((t) => t < 1000).length;
        const secondWindow = fullestWindow(
          r.starts.filter((t) => t >= 500),
          limit.perMs,
        ).max;
        const row = {
          variant: v.name,
          rep,
          maxInWindow: r.maxInWindow,
          at: r.maxWindowAt,
          firstSecond,
          secondWindow,
          handedBackLate: r.handedBackLate,
          startsPerSec: Math.round(((r.starts.length - 1) / Math.max(1, r.spanMs)) * 100_000) / 100,
          load: loadAverage(),
        };
        progress(JSON.stringify(row));
        rows.push(row);
      }
    }
    const latencies = [];
    for (let rep = 1; rep <= reps; rep++) {
      const l = await firstBatchLatency(bed, `first-${rep}`, 8);
      const row = {
        firstBatchMs: { min: l[0], median: l[l.length >> 1], max: l[l.length - 1] },
        rep,
        load: loadAverage(),
      };
      progress(JSON.stringify(row));
      latencies.push(row);
    }
    if (flags.has("json")) console.log(JSON.stringify({ rows, latencies }));
  } finally {
    await bed.stop();
  }
});
