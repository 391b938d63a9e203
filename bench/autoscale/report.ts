// The autoscaling comparison's figures from what a run recorded (pure): waits from the enqueue
// times and the handler's start records, pod-seconds and replicas from the samples, one SVG per
// workload with a line per arm, and the Markdown tables.

/** One sample of a pool, every second or so. */
export interface Sample {
  /** Seconds after the first enqueue. */
  t: number;
  /** The Deployment's spec.replicas: what the autoscaler asked for. */
  desired: number;
  /** Worker processes alive (draining ones included): what the node pays for. */
  pods: number;
}

export interface RunInput {
  arm: string;
  workload: string;
  /** ms since epoch of the first enqueue. */
  t0: number;
  windowMs: number;
  /** ms since epoch when the run stopped measuring (≥ window end unless every job started earlier). */
  endMs: number;
  /** id → when its enqueue call was made (ms since epoch). */
  enqueuedAt: ReadonlyMap<string, number>;
  /** Every handler start: id, when (ms since epoch), attempt. */
  executions: readonly { id: string; t: number; attempt: number }[];
  samples: readonly Sample[];
  /** The queue's counters: jobs handed back by a draining worker, leases that expired. */
  handedBack: number;
  stalled: number;
}

export interface RunSummary {
  arm: string;
  workload: string;
  jobs: number;
  /** Jobs that started at least once. */
  started: number;
  /** Enqueue → first start, seconds. */
  waitP50S: number;
  waitP95S: number;
  waitMaxS: number;
  /** First enqueue → first start (the pool was at zero before); not from t0: a ramp's first job comes later. */
  firstStartS: number | null;
  /** Seconds until the last job started. */
  lastStartS: number | null;
  /** ∫ worker processes dt over the run, seconds. */
  podSeconds: number;
  maxReplicas: number;
  /** Jobs a scale-in interrupted: handed back by a draining worker, or lease expired. */
  handedBack: number;
  stalled: number;
  /** Jobs that started more than once. */
  ranTwice: number;
  /** Jobs not started by the end of the window. */
  unstartedAtWindowEnd: number;
  durationS: number;
  /** Desired replicas over time: [seconds, replicas] at each change. */
  replicas: [number, number][];
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

const r2 = (x: number) => Math.round(x * 100) / 100;

export function summarizeRun(run: RunInput): RunSummary {
  const first = new Map<string, number>();
  const starts = new Map<string, number>();
  for (const e of run.executions) {
    if (!run.enqueuedAt.has(e.id)) continue;
    starts.set(e.id, (starts.get(e.id) ?? 0) + 1);
    const prev = first.get(e.id);
    if (prev === undefined || e.t < prev) first.set(e.id, e.t);
  }
  const waits: number[] = [];
  for (const [id, t] of first) waits.push((t - run.enqueuedAt.get(id)!) / 1000);
  waits.sort((a, b) => a - b);
  const startTimes = [...first.values()].sort((a, b) => a - b);
  const windowEnd = run.t0 + run.windowMs;
  const endS = (run.endMs - run.t0) / 1000;
  let podSeconds = 0;
  const samples = run.samples.filter((s) => s.t <= endS);
  for (let i = 0; i < samples.length; i++) {
    const next = i + 1 < samples.length ? samples[i + 1]!.t : endS;
    podSeconds += samples[i]!.pods * Math.max(0, next - samples[i]!.t);
  }
  const replicas: [number, number][] = [];
  for (const s of samples)
    if (replicas.length === 0 || replicas.at(-1)![1] !== s.desired) replicas.push([r2(s.t), s.desired]);
  return {
    arm: run.arm,
    workload: run.workload,
    jobs: run.enqueuedAt.size,
    started: first.size,
    waitP50S: r2(percentile(waits, 50)),
    waitP95S: r2(percentile(waits, 95)),
    waitMaxS: r2(waits.at(-1) ?? 0),
    firstStartS: startTimes.length
      ? r2((startTimes[0]! - Math.min(...run.enqueuedAt.values())) / 1000)
      : null,
    lastStartS: startTimes.length ? r2((startTimes.at(-1)! - run.t0) / 1000) : null,
    podSeconds: Math.round(podSeconds),
    maxReplicas: Math.max(0, ...samples.map((s) => s.desired)),
    handedBack: run.handedBack,
    stalled: run.stalled,
    ranTwice: [...starts.values()].filter((n) => n > 1).length,
    unstartedAtWindowEnd: run.enqueuedAt.size - startTimes.filter((t) => t <= windowEnd).length,
    durationS: r2(endS),
    replicas,
  };
}

/**
 * ∫ desired replicas dt from the first enqueue until the last job started: what the scale-up
 * cost while there was work waiting, apart from how long each arm keeps pods afterwards
 * (pod-seconds over the window also count the scale-down policy).
 */
export function replicaSecondsToLastStart(r: RunSummary): number | null {
  if (r.lastStartS === null) return null;
  let total = 0;
  for (let i = 0; i < r.replicas.length; i++) {
    const [t, v] = r.replicas[i]!;
    const next = Math.min(r.replicas[i + 1]?.[0] ?? Infinity, r.lastStartS);
    if (next > t) total += v * (next - t);
  }
  return Math.round(total);
}

// ---- SVG ----------------------------------------------------------------------------------

const COLORS = ["#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b"];
const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** Desired replicas over time, one step line per arm, on shared axes. */
export function renderReplicasSvg(title: string, subtitle: string, runs: readonly RunSummary[]): string {
  const W = 860;
  const H = 380;
  const m = { left: 56, right: 200, top: 58, bottom: 46 };
  const pw = W - m.left - m.right;
  const ph = H - m.top - m.bottom;
  const maxT = Math.max(1, ...runs.map((r) => r.durationS));
  const maxY = Math.max(1, ...runs.map((r) => r.maxReplicas));
  const x = (t: number) => m.left + (t / maxT) * pw;
  const y = (v: number) => m.top + ph - (v / maxY) * ph;
  const font = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"';
  const parts: string[] = [
    `<text x="${m.left}" y="22" font-size="15" font-weight="bold" ${font}>${esc(title)}</text>`,
    `<text x="${m.left}" y="40" font-size="11" fill="#555" ${font}>${esc(subtitle)}</text>`,
  ];
  const yStep = Math.max(1, Math.ceil(maxY / 6));
  for (let v = 0; v <= maxY; v += yStep) {
    parts.push(
      `<line x1="${m.left}" x2="${m.left + pw}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#e5e5e5"/>`,
      `<text x="${m.left - 6}" y="${(y(v) + 4).toFixed(1)}" font-size="11" text-anchor="end" ${font}>${v}</text>`,
    );
  }
  const tStep = [5, 10, 15, 30, 60, 120, 300].find((s) => maxT / s <= 10) ?? 600;
  for (let t = 0; t <= maxT; t += tStep) {
    parts.push(
      `<line x1="${x(t).toFixed(1)}" x2="${x(t).toFixed(1)}" y1="${m.top + ph}" y2="${m.top + ph + 4}" stroke="#333"/>`,
      `<text x="${x(t).toFixed(1)}" y="${m.top + ph + 17}" font-size="11" text-anchor="middle" ${font}>${t}</text>`,
    );
  }
  parts.push(
    `<line x1="${m.left}" x2="${m.left + pw}" y1="${m.top + ph}" y2="${m.top + ph}" stroke="#333"/>`,
    `<line x1="${m.left}" x2="${m.left}" y1="${m.top}" y2="${m.top + ph}" stroke="#333"/>`,
    `<text x="${m.left + pw / 2}" y="${H - 8}" font-size="12" text-anchor="middle" ${font}>seconds after the first enqueue</text>`,
    `<text x="14" y="${m.top + ph / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 14 ${m.top + ph / 2})" ${font}>desired replicas</text>`,
  );
  runs.forEach((r, i) => {
    const color = COLORS[i % COLORS.length]!;
    const pts: string[] = [];
    let prev: number | undefined;
    for (const [t, v] of r.replicas) {
      if (prev !== undefined) pts.push(`${x(t).toFixed(1)},${y(prev).toFixed(1)}`);
      pts.push(`${x(t).toFixed(1)},${y(v).toFixed(1)}`);
      prev = v;
    }
    if (prev !== undefined) pts.push(`${x(r.durationS).toFixed(1)},${y(prev).toFixed(1)}`);
    // offset each line by a pixel so equal stretches stay visible
    parts.push(
      `<polyline fill="none" stroke="${color}" stroke-width="2" transform="translate(0 ${-i})" points="${pts.join(" ")}"/>`,
    );
    const ly = m.top + 10 + i * 44;
    parts.push(
      `<line x1="${m.left + pw + 14}" x2="${m.left + pw + 34}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="3"/>`,
      `<text x="${m.left + pw + 40}" y="${ly + 4}" font-size="12" ${font}>${esc(r.arm)}</text>`,
      `<text x="${m.left + pw + 40}" y="${ly + 19}" font-size="10" fill="#555" ${font}>p95 ${r.waitP95S} s · ${r.podSeconds} pod-s</text>`,
    );
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">\n<rect width="100%" height="100%" fill="#ffffff"/>\n${parts.join("\n")}\n</svg>\n`;
}

// ---- Markdown -----------------------------------------------------------------------------

/** A workload's waits with no autoscaler at all: see idealWaits. */
export interface FloorWaits {
  slots: number;
  p50S: number;
  p95S: number;
  maxS: number;
}

/**
 * The waits of a trace with `slots` job slots ready at the first enqueue and no start-up: each
 * job starts, in arrival order, once a slot is free (and not before `notBeforeMs`, a resume). No
 * autoscaler capped at the same slots does better; an arm's p95 above this one is what its
 * scaling cost (a burst larger than the slots waits for them whoever scales).
 */
export function idealWaits(
  arrivals: readonly { at: number; sleepMs: number }[],
  slots: number,
  notBeforeMs = 0,
): FloorWaits {
  const free = new Array<number>(Math.max(1, slots)).fill(0);
  const waits: number[] = [];
  for (const a of [...arrivals].sort((x, y) => x.at - y.at)) {
    let k = 0;
    for (let i = 1; i < free.length; i++) if (free[i]! < free[k]!) k = i;
    const start = Math.max(a.at, notBeforeMs, free[k]!);
    free[k] = start + a.sleepMs;
    waits.push((start - a.at) / 1000);
  }
  waits.sort((x, y) => x - y);
  return {
    slots,
    p50S: r2(percentile(waits, 50)),
    p95S: r2(percentile(waits, 95)),
    maxS: r2(waits.at(-1) ?? 0),
  };
}

// (below a tenth of a second a ratio says nothing: "–")
const ratio = (a: number, b: number) => (b >= 0.1 ? (Math.round((a / b) * 100) / 100).toFixed(2) : "–");

/**
 * The goal as one table: each Conveyor arm against `base` (KEDA) per workload — p95 wait,
 * p95 above the floor (what scaling cost; see idealWaits), pod-seconds and first start.
 */
export function renderVersus(
  workloads: readonly { name: string; runs: readonly RunSummary[]; floor?: FloorWaits }[],
  base = "keda-tuned",
): string {
  const rows: string[] = [];
  for (const w of workloads) {
    const k = w.runs.find((r) => r.arm === base);
    if (!k) continue;
    const floor = w.floor?.p95S ?? 0;
    for (const r of w.runs.filter((x) => x.arm.startsWith("conveyor"))) {
      rows.push(
        `| ${w.name} | ${r.arm} | ${r.waitP95S} vs ${k.waitP95S} = ${ratio(r.waitP95S, k.waitP95S)} | ${r2(Math.max(0, r.waitP95S - floor))} vs ${r2(Math.max(0, k.waitP95S - floor))} = ${ratio(Math.max(0, r.waitP95S - floor), Math.max(0, k.waitP95S - floor))} | ${r.podSeconds} vs ${k.podSeconds} = ${ratio(r.podSeconds, k.podSeconds)} | ${r.firstStartS ?? "–"} vs ${k.firstStartS ?? "–"} | ${r.handedBack + r.stalled} vs ${k.handedBack + k.stalled} |`,
      );
    }
  }
  if (rows.length === 0) return "";
  return [
    `| workload | arm | wait p95 s (vs ${base}) | p95 above the floor s | pod-seconds | first start s | interrupted |`,
    "|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}

export function renderTable(runs: readonly RunSummary[], floor?: FloorWaits): string {
  const head =
    "| arm | jobs | started | wait p50 s | wait p95 s | wait max s | first start s | pod-seconds (window) | replica-s to last start | max replicas | handed back | lease expired | ran twice | unstarted at window end |\n" +
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
  const rows = runs.map(
    (r) =>
      `| ${r.arm} | ${r.jobs} | ${r.started} | ${r.waitP50S} | ${r.waitP95S} | ${r.waitMaxS} | ${r.firstStartS ?? "–"} | ${r.podSeconds} | ${replicaSecondsToLastStart(r) ?? "–"} | ${r.maxReplicas} | ${r.handedBack} | ${r.stalled} | ${r.ranTwice} | ${r.unstartedAtWindowEnd} |`,
  );
  if (floor && runs.length > 0)
    rows.push(
      `| *floor: ${floor.slots} slots from the first enqueue, no start-up* | ${runs[0]!.jobs} | | ${floor.p50S} | ${floor.p95S} | ${floor.maxS} | 0 | | | | | | | |`,
    );
  return [head, ...rows].join("\n");
}
