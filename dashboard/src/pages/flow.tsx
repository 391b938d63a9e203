// One flow (docs/flows.md): its jobs as a graph grouped by stage — a column per queue, in the
// order the flow reaches them, nodes coloured by state, edges to their parents — and its counts
// by state, following the job events of its jobs live. A stage shows at most STAGE_NODES nodes
// (the ones still moving first); the rest are one summary node with their counts, so a flow of
// 1,000 jobs stays readable.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, q, throttle, useLive } from "../api.ts";
import type { FlowReply } from "../apiTypes.generated.ts";
import { ago, ErrorNote, num, StateBadge, time } from "../ui.tsx";

type FlowJob = FlowReply["jobs"][number];

/** Nodes shown per stage before the rest are summed up in one node. */
export const STAGE_NODES = 50;

const COL_W = 200;
const COL_GAP = 90;
const NODE_W = 200;
const NODE_H = 30;
const ROW_H = 40;
const TOP = 8;

/** Which nodes a crowded stage shows first: the ones that are moving or went wrong. */
const SHOW_FIRST: Record<string, number> = {
  active: 0,
  dead: 1,
  cancelled: 1,
  retrying: 2,
  ready: 3,
  queued: 3,
  delayed: 3,
  "waiting-children": 4,
  completed: 5,
};

interface Stage {
  queue: string;
  counts: Record<string, number>;
  shown: FlowJob[];
  /** The jobs past STAGE_NODES, summed up in one node. */
  hidden: FlowJob[];
}

/** Each job's depth (the longest path from a job without parents): orders stages and nodes. */
function depths(jobs: FlowJob[]): Map<string, number> {
  const byKey = new Map(jobs.map((j) => [j.key, j]));
  const depth = new Map<string, number>();
  const of = (key: string): number => {
    const known = depth.get(key);
    if (known !== undefined) return known;
    depth.set(key, 0); // (a cycle cannot be enqueued; this only guards the recursion)
    const j = byKey.get(key);
    let d = 0;
    for (const p of j?.parents ?? []) if (byKey.has(p)) d = Math.max(d, of(p) + 1);
    depth.set(key, d);
    return d;
  };
  for (const j of jobs) of(j.key);
  return depth;
}

export function stagesOf(jobs: FlowJob[]): Stage[] {
  const depth = depths(jobs);
  const byQueue = new Map<string, FlowJob[]>();
  for (const j of jobs) {
    const list = byQueue.get(j.queue) ?? [];
    list.push(j);
    byQueue.set(j.queue, list);
  }
  const minDepth = (list: FlowJob[]) => Math.min(...list.map((j) => depth.get(j.key) ?? 0));
  return [...byQueue.entries()]
    .sort(([qa, a], [qb, b]) => minDepth(a) - minDepth(b) || (qa < qb ? -1 : qa > qb ? 1 : 0))
    .map(([queue, list]) => {
      const counts: Record<string, number> = {};
      for (const j of list) counts[j.state] = (counts[j.state] ?? 0) + 1;
      const ordered = [...list].sort((a, b) => (depth.get(a.key) ?? 0) - (depth.get(b.key) ?? 0));
      if (ordered.length <= STAGE_NODES) return { queue, counts, shown: ordered, hidden: [] };
      const rank = (j: FlowJob) => SHOW_FIRST[j.state] ?? 3;
      const picked = new Set(
        [...ordered]
          .sort((a, b) => rank(a) - rank(b))
          .slice(0, STAGE_NODES - 1)
          .map((j) => j.key),
      );
      return {
        queue,
        counts,
        shown: ordered.filter((j) => picked.has(j.key)),
        hidden: ordered.filter((j) => !picked.has(j.key)),
      };
    });
}

const countsText = (counts: Record<string, number>) =>
  Object.entries(counts)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([state, n]) => `${num(n)} ${state}`)
    .join(", ");

const short = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

function Graph({ flow }: { flow: FlowReply }) {
  const stages = useMemo(() => stagesOf(flow.jobs), [flow]);
  // Where each key is drawn: its own node, or its stage's summary node.
  const at = new Map<string, { x: number; y: number }>();
  const summaries: { x: number; y: number; stage: Stage }[] = [];
  let rows = 0;
  stages.forEach((st, c) => {
    const x = c * (COL_W + COL_GAP);
    st.shown.forEach((j, r) => at.set(j.key, { x, y: TOP + r * ROW_H }));
    if (st.hidden.length > 0) {
      const y = TOP + st.shown.length * ROW_H;
      summaries.push({ x, y, stage: st });
      for (const j of st.hidden) at.set(j.key, { x, y });
    }
    rows = Math.max(rows, st.shown.length + (st.hidden.length > 0 ? 2 : 0));
  });
  const edges = new Map<string, { from: { x: number; y: number }; to: { x: number; y: number } }>();
  for (const j of flow.jobs) {
    const to = at.get(j.key);
    if (!to) continue;
    for (const p of j.parents) {
      const from = at.get(p);
      if (!from) continue;
      edges.set(`${from.x},${from.y}>${to.x},${to.y}`, { from, to });
    }
  }
  const width = Math.max(1, stages.length) * (COL_W + COL_GAP) - COL_GAP + 2;
  const height = TOP * 2 + Math.max(1, rows) * ROW_H;
  return (
    <div class="flow-graph">
      <div class="flow-stages" style={{ width: `${width}px` }}>
        {stages.map((st) => (
          <div
            class="flow-stage"
            data-stage={st.queue}
            style={{ width: `${COL_W}px`, marginRight: `${COL_GAP}px` }}
          >
            <a class="mono" href={`#/queue/${q(st.queue)}`}>
              {st.queue}
            </a>
            <div class="small muted" data-stage-counts>
              {countsText(st.counts)}
            </div>
          </div>
        ))}
      </div>
      <svg
        width={width}
        height={height}
        viewBox={`0 0 ${width} ${height}`}
        role="img"
        aria-label={`flow ${flow.id}: ${flow.jobs.length} jobs in ${stages.length} stages`}
      >
        {[...edges.values()].map(({ from, to }) => {
          const [x1, y1, x2, y2] = [from.x + NODE_W, from.y + NODE_H / 2, to.x, to.y + NODE_H / 2];
          const mid = (x1 + x2) / 2;
          return (
            <path
              class="flow-edge"
              d={
                x2 > x1
                  ? `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`
                  : `M${from.x + NODE_W / 2},${from.y + NODE_H} L${to.x + NODE_W / 2},${to.y}`
              }
            />
          );
        })}
        {stages.flatMap((st) =>
          st.shown.map((j) => {
            const { x, y } = at.get(j.key)!;
            // (a waiting node's count of parents still open: the width of the node allows "waiting")
            const label = j.pending !== undefined ? `waiting · ${j.pending} to go` : j.state;
            return (
              <a href={`#/job/${q(j.id)}?queue=${q(j.queue)}`} aria-label={`${j.key}: ${j.state}`}>
                <g class={`flow-node state-${j.state}`} data-key={j.key} data-state={j.state}>
                  <title>
                    {`${j.key} (${j.id}) — ${j.state}` +
                      (j.parents.length ? `\nparents: ${j.parents.join(", ")}` : "") +
                      (j.onParentFailure !== "fail" ? `\non parent failure: ${j.onParentFailure}` : "") +
                      (j.reason ? `\n${j.reason}` : "")}
                  </title>
                  <rect x={x} y={y} width={NODE_W} height={NODE_H} rx={6} />
                  <text x={x + 8} y={y + 19} class="flow-key">
                    {short(j.key, 12)}
                  </text>
                  <text x={x + NODE_W - 8} y={y + 19} class="flow-state" text-anchor="end">
                    {short(label, 24)}
                  </text>
                </g>
              </a>
            );
          }),
        )}
        {summaries.map(({ x, y, stage }) => {
          const counts: Record<string, number> = {};
          for (const j of stage.hidden) counts[j.state] = (counts[j.state] ?? 0) + 1;
          return (
            <g class="flow-node flow-more" data-more={stage.queue}>
              <title>{countsText(counts)}</title>
              <rect x={x} y={y} width={NODE_W} height={NODE_H * 2} rx={6} />
              <text x={x + 8} y={y + 19} class="flow-key">
                {`+${num(stage.hidden.length)} more`}
              </text>
              <text x={x + 8} y={y + 45} class="flow-state">
                {short(countsText(counts), 30)}
              </text>
            </g>
          );
        })}
      </svg>
    </div>
  );
}

export function FlowPage({ id }: { id: string }) {
  const [flow, setFlow] = useState<FlowReply | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    api<FlowReply>(`/flows/${q(id)}`)
      .then((f) => {
        setFlow(f);
        setError(null);
      })
      .catch((e: Error) => setError(e.message));
  const loadRef = useRef(load);
  loadRef.current = load;
  // Many events of one flow (a stage of 1,000 jobs completing) are one reload.
  const [reload] = useState(() => throttle(() => void loadRef.current(), 400));
  const ids = useMemo(() => new Set(flow?.jobs.map((j) => j.id)), [flow]);
  useEffect(() => {
    void load();
  }, []);
  useLive((e) => {
    if (e.type === "$queues" || e.type === "$gap") reload();
    else if (ids.has((e as { id?: string }).id ?? "")) reload();
  });

  if (!flow) return error ? <ErrorNote error={error} /> : <p class="muted">Loading…</p>;
  return (
    <section>
      <p class="crumbs">
        <a href="#/">Queues</a> / flows / <span class="mono">{flow.id}</span>
      </p>
      <h1>
        Flow <span class="mono">{flow.id}</span>
      </h1>
      <ErrorNote error={error} />
      <dl class="facts">
        <div>
          <dt>Pipeline</dt>
          <dd class="mono">{flow.pipeline}</dd>
        </div>
        <div>
          <dt>Jobs</dt>
          <dd data-field="jobs">{num(flow.jobs.length)}</dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd title={time(flow.createdAt)}>{ago(flow.createdAt)}</dd>
        </div>
        <div>
          <dt>Source</dt>
          <dd>{flow.source === "redis" ? "live (Redis)" : "records (no longer in Redis)"}</dd>
        </div>
      </dl>
      <p class="flow-counts" data-section="counts">
        {Object.entries(flow.counts)
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([state, n]) => (
            <span class="flow-count" data-count={state}>
              <StateBadge state={state} /> <b>{num(n)}</b>
            </span>
          ))}
      </p>
      <div class="card">
        <Graph flow={flow} />
      </div>
    </section>
  );
}
