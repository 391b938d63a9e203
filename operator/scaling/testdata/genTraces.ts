// Writes the recorded arrival traces the latency-mode tests replay (ramp.json, spikes.json, mixed.json):
// seeded, so running it again writes the same files. `node operator/scaling/testdata/genTraces.ts`
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { seededRandom, type ArrivalTrace } from "../../../test/support/simulate.ts";

/** Poisson arrivals of a rate that varies with time (thinning), durations log-normal around a median. */
function trace(
  name: string,
  description: string,
  seed: number,
  seconds: number,
  ratePerSecond: (t: number) => number,
  maxRate: number,
  medianMs: number,
  bursts: { at: number; jobs: number; withinMs: number }[] = [],
  long?: { share: number; minMs: number; maxMs: number },
): ArrivalTrace {
  const rnd = seededRandom(seed);
  const duration = () => {
    if (long && rnd() < long.share) return Math.round(long.minMs + rnd() * (long.maxMs - long.minMs));
    // Box-Muller: log-normal, sigma 0.5, capped at 5 × the median.
    const z = Math.sqrt(-2 * Math.log(1 - rnd())) * Math.cos(2 * Math.PI * rnd());
    return Math.round(Math.min(5 * medianMs, medianMs * Math.exp(0.5 * z)));
  };
  const arrivals: [number, number][] = [];
  for (let t = 0; ;) {
    t += -Math.log(1 - rnd()) / maxRate;
    if (t >= seconds) break;
    if (rnd() * maxRate < ratePerSecond(t)) arrivals.push([Math.round(t * 1000), duration()]);
  }
  for (const b of bursts)
    for (let k = 0; k < b.jobs; k++)
      arrivals.push([b.at * 1000 + Math.round(rnd() * b.withinMs), duration()]);
  arrivals.sort((a, b) => a[0] - b[0]);
  return { name, description, arrivals };
}

const here = import.meta.dirname;
const ramp = trace(
  "ramp",
  "6 min: Poisson arrivals ramping 0.2 → 6 jobs/s over 3 min and back; jobs log-normal, median 2 s",
  33,
  360,
  (t) => (t < 180 ? 0.2 + (5.8 * t) / 180 : 0.2 + (5.8 * (360 - t)) / 180),
  6,
  2000,
);
const spikes = trace(
  "spikes",
  "7 min: 0.3 jobs/s, and a spike of 120 jobs within 3 s every 2 minutes (at 30, 150, 270, 390 s); jobs log-normal, median 1 s",
  34,
  420,
  () => 0.3,
  0.3,
  1000,
  [30, 150, 270, 390].map((at) => ({ at, jobs: 120, withinMs: 3000 })),
);
const mixed = trace(
  "mixed",
  "8 min: Poisson arrivals of 2 jobs/s; 9 in 10 jobs log-normal, median 1 s, 1 in 10 uniform 30–60 s (most slots are the long jobs')",
  35,
  480,
  () => 2,
  2,
  1000,
  [],
  { share: 0.1, minMs: 30_000, maxMs: 60_000 },
);
for (const t of [ramp, spikes, mixed]) {
  const file = join(here, `${t.name}.json`);
  writeFileSync(
    file,
    `{"name":${JSON.stringify(t.name)},"description":${JSON.stringify(t.description)},"arrivals":[\n${t.arrivals.map((a) => JSON.stringify(a)).join(",\n")}\n]}\n`,
  );
  console.log(`wrote ${file}: ${t.arrivals.length} arrivals`);
}
