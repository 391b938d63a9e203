// WorkerPools (shown when the server reaches the Kubernetes API): replicas ready/desired and each
// pool's rollout (phase, step, canary weight, linking to the pool page's rollout card) and, per pool, why it scaled — its recent decisions, the operator's and the HPA's — backlog vs
// replicas on one chart, its canary rollout (spec.rollout: step, weights, both versions' figures
// over the step and their failure rates over time), and its pods with busy/free slots and their
// deletion cost.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, q } from "../api.ts";
import { ago, Chart, ErrorNote, num, time } from "../ui.tsx";

interface PoolSummary {
  namespace: string;
  name: string;
  queue: string;
  replicas: number;
  readyReplicas: number;
  desiredReplicas: number;
  backlog: number | null;
  inflight: number | null;
  /** When the oldest waiting job was enqueued (status.oldestReadySince); null when none waits. */
  oldestReadySince: string | null;
  /** Latency mode's wait target (spec.scaling.targetWaitSeconds). */
  targetWaitSeconds: number | null;
  minReplicas: number | null;
  maxReplicas: number | null;
  lastDecision: { replicas?: number; from?: number; reason?: string; message?: string; at?: string } | null;
  cap: { replicas: number; by: string | null; reason: string } | null;
  /** The stage's contract as the operator published it (spec.contract); null when none. */
  contract: { hash?: string; publishedAt?: string; source?: string } | null;
  ready: string;
  /** The canary rollout in progress, or how the last one ended (spec.rollout); null when none. */
  rollout: Rollout | null;
}

/** One version's figures over the step in progress, as the operator judges it. */
interface VersionFigures {
  attempts: number;
  failed: number;
  dead: number;
  failureRate: number;
  p95Ms?: number;
}

/** Both versions' counters at a sample of the API (monotonic: rates come from differences). */
interface RolloutSample {
  at: number;
  step: number;
  weight: number;
  stable: { attempts: number; failed: number };
  canary: { attempts: number; failed: number };
}

interface Rollout {
  phase: string;
  step: number;
  steps: { weight: number; holdSeconds: number }[];
  weight: number;
  stableHash: string | null;
  canaryHash: string | null;
  startedAt: string | null;
  stepStartedAt: string | null;
  verdict: string | null;
  message: string;
  summary: string;
  /** Over the step in progress (null when none is). */
  stable?: VersionFigures | null;
  canary?: VersionFigures | null;
  /** How often the API samples the counters (null: it does not). */
  sampleSeconds?: number | null;
  history?: RolloutSample[];
}

interface Decision {
  at: string;
  type: string;
  reason: string;
  from: number | null;
  to: number | null;
  backlog: number | null;
  message: string;
  count: number;
}

interface PoolDetail extends PoolSummary {
  conditions: { type: string; status: string; reason?: string; message?: string }[];
  decisions: Decision[];
  pods: {
    name: string;
    phase: string;
    ready: boolean;
    deletionCost: number | null;
    slots: number | null;
    busy: number | null;
    draining: boolean | null;
  }[];
}

export function PoolsPage() {
  const [pools, setPools] = useState<PoolSummary[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = () =>
      api<{ pools: PoolSummary[] }>("/pools")
        .then((r) => setPools(r.pools))
        .catch((e: Error) => setError(e.message));
    void load();
    const t = setInterval(load, 10_000);
    return () => clearInterval(t);
  }, []);
  if (!pools) return error ? <ErrorNote error={error} /> : <p class="muted">Loading pools…</p>;
  return (
    <section>
      <h1>Worker pools</h1>
      {pools.length === 0 ? (
        <p class="muted empty">No WorkerPools in the cluster.</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th scope="col">Pool</th>
              <th scope="col">Queue</th>
              <th scope="col" class="n">
                Ready / desired
              </th>
              <th scope="col" class="n">
                Backlog
              </th>
              <th scope="col" class="n">
                In flight
              </th>
              <th scope="col" class="n">
                Oldest waiting
              </th>
              <th scope="col">Rollout</th>
              <th scope="col">Last decision</th>
              <th scope="col">Ready</th>
            </tr>
          </thead>
          <tbody>
            {pools.map((p) => (
              <tr key={`${p.namespace}/${p.name}`} data-pool={p.name}>
                <th scope="row">
                  <a href={`#/pool/${q(p.namespace)}/${q(p.name)}`}>
                    {p.namespace}/{p.name}
                  </a>
                </th>
                <td>
                  <a href={`#/queue/${q(p.queue)}`}>{p.queue}</a>
                </td>
                <td class="n">
                  {p.readyReplicas} / {p.desiredReplicas}
                </td>
                <td class="n">{num(p.backlog)}</td>
                <td class="n">{num(p.inflight)}</td>
                <td class="n" data-oldest>
                  <OldestWait pool={p} />
                </td>
                <td class="small" data-rollout={p.rollout?.phase ?? ""}>
                  {p.rollout ? (
                    <a href={`#/pool/${q(p.namespace)}/${q(p.name)}?card=rollout`}>
                      {rolloutCell(p.rollout)}
                    </a>
                  ) : (
                    "—"
                  )}
                </td>
                <td class="small">
                  {p.lastDecision
                    ? `${p.lastDecision.from} → ${p.lastDecision.replicas} ${p.lastDecision.reason} (${ago(p.lastDecision.at)})`
                    : "—"}
                </td>
                <td>{p.ready}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** The oldest waiting job's age (as of this render), against the wait target in latency mode. */
const PHASE_WORDS: Record<string, string> = {
  Promoted: "promoted",
  RolledBack: "rolled back",
  Aborted: "aborted",
};

/** The Pools list's rollout cell: the step and the canary's weight while one runs, else how it ended. */
export function rolloutCell(r: Pick<Rollout, "phase" | "step" | "steps" | "weight">): string {
  if (r.phase === "Progressing") return `step ${r.step + 1}/${r.steps.length} · canary ${r.weight}%`;
  return PHASE_WORDS[r.phase] ?? r.phase;
}

function OldestWait({ pool }: { pool: PoolSummary }) {
  const since = pool.oldestReadySince ? Date.parse(pool.oldestReadySince) : NaN;
  const age = Number.isFinite(since) ? `${Math.max(0, Math.round((Date.now() - since) / 1000))} s` : "—";
  const target = pool.targetWaitSeconds !== null ? ` / target ${pool.targetWaitSeconds} s` : "";
  return (
    <span title={pool.oldestReadySince ? `enqueued ${time(pool.oldestReadySince)}` : "no job is waiting"}>
      {age}
      {target && <span class="small muted">{target}</span>}
    </span>
  );
}

interface Sample {
  at: number;
  replicas: number | null;
  backlog: number | null;
}

/** How often the page reads the pool again: each read is a sample of its backlog and replicas. */
const POOL_REFRESH_MS = 10_000;

/**
 * What the chart knows, oldest first: the pool at each decision (the replicas it set, the backlog
 * it saw) and at each read of this page. Nothing is known between them, so the backlog is drawn
 * as dots and the replicas as steps (they hold until the next decision).
 */
export function poolSamples(decisions: Decision[], reads: Sample[]): Sample[] {
  const points: Sample[] = [
    ...decisions
      .filter((d) => d.to !== null)
      .map((d) => ({ at: Date.parse(d.at), replicas: d.to, backlog: d.backlog })),
    ...reads,
  ].filter((p) => Number.isFinite(p.at));
  // (one point per time, as the time axis needs: a read at a decision's instant is the later word)
  const byTime = new Map(points.map((p) => [p.at, p]));
  return [...byTime.values()].sort((a, b) => a.at - b.at);
}

/** `card` "rollout" (the Pools list's link, `?card=rollout`) scrolls the rollout card into view. */
export function PoolPage({
  namespace,
  name,
  card,
}: {
  namespace: string;
  name: string;
  card?: string | null;
}) {
  const [pool, setPool] = useState<PoolDetail | null>(null);
  const [reads, setReads] = useState<Sample[]>([]);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    setReads([]);
    const load = () =>
      api<PoolDetail>(`/pools/${q(namespace)}/${q(name)}`)
        .then((p) => {
          setPool(p);
          setReads((r) =>
            [...r, { at: Date.now(), replicas: p.desiredReplicas, backlog: p.backlog }].slice(-360),
          );
          setError(null);
        })
        .catch((e: Error) => setError(e.message));
    void load();
    const t = setInterval(load, POOL_REFRESH_MS);
    return () => clearInterval(t);
  }, [namespace, name]);
  if (!pool) return error ? <ErrorNote error={error} /> : <p class="muted">Loading…</p>;
  // Replicas on their own axis, or a handful of pods beside a backlog of hundreds draws as a flat
  // line at zero.
  const samples = poolSamples(pool.decisions, reads);
  return (
    <section>
      <p class="crumbs">
        <a href="#/pools">Pools</a> / {namespace}/{name}
      </p>
      <h1>
        {namespace}/{name}
      </h1>
      <dl class="counts">
        <div>
          <dt>ready / desired</dt>
          <dd>
            {pool.readyReplicas} / {pool.desiredReplicas}
          </dd>
        </div>
        <div>
          <dt>backlog</dt>
          <dd>{num(pool.backlog)}</dd>
        </div>
        <div>
          <dt>in flight</dt>
          <dd>{num(pool.inflight)}</dd>
        </div>
        <div>
          <dt>oldest waiting</dt>
          <dd data-oldest>
            <OldestWait pool={pool} />
          </dd>
        </div>
        <div>
          <dt>min … max</dt>
          <dd>
            {pool.minReplicas ?? "—"} … {pool.maxReplicas ?? "—"}
          </dd>
        </div>
        {pool.contract?.hash && (
          <div>
            <dt>contract</dt>
            <dd
              class="mono"
              data-contract
              title={`${pool.contract.source ?? ""}, published ${time(pool.contract.publishedAt ?? "")}`}
            >
              {pool.contract.hash}
            </dd>
          </div>
        )}
      </dl>
      <ErrorNote error={error} />
      <div class="card">
        <h2>Backlog and replicas</h2>
        <Chart
          x={samples.map((d) => d.at)}
          series={[
            { label: "backlog", values: samples.map((d) => d.backlog), color: "#e83", points: true },
            {
              label: "desired replicas",
              values: samples.map((d) => d.replicas),
              color: "#57c",
              step: true,
              axis: "right",
            },
          ]}
          axes={{ left: "backlog", right: "replicas", counts: ["left", "right"] }}
          height={180}
        />
        <p class="small muted">
          The backlog as the operator saw it at each decision, and as this page read it every{" "}
          {POOL_REFRESH_MS / 1000} s while open; replicas hold between decisions.
        </p>
      </div>
      {pool.rollout && <RolloutCard rollout={pool.rollout} focus={card === "rollout"} />}
      <div class="card">
        <h2>Why it scaled</h2>
        {pool.cap && (
          <p class="cap" data-cap-by={pool.cap.by ?? ""}>
            <strong>
              Capped at {pool.cap.replicas} replica(s)
              {pool.cap.by === "resources"
                ? " by its resources"
                : pool.cap.by === "rateLimit"
                  ? " by its rate limit"
                  : pool.cap.by === "groups"
                    ? " by its groups (waiting jobs belong to groups at their limit or paused)"
                    : ""}
            </strong>
            : <span class="small">{pool.cap.reason}</span>
          </p>
        )}
        {pool.decisions.length === 0 ? (
          <p class="muted">
            No scale decisions or problems recorded (the pool keeps its last 8 decisions in status).
          </p>
        ) : (
          <table class="grid decisions">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Replicas</th>
                <th scope="col">Reason</th>
                <th scope="col">Why</th>
              </tr>
            </thead>
            <tbody>
              {[...pool.decisions].reverse().map((d, i) => (
                <tr key={i} class={d.type === "Warning" ? "warn" : ""}>
                  <td title={time(d.at)}>{ago(d.at)}</td>
                  <td>{d.from !== null ? `${d.from} → ${d.to}` : "—"}</td>
                  <td>
                    <strong>{d.reason}</strong>
                  </td>
                  <td class="small">{d.message}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
      <div class="card">
        <h2>Conditions</h2>
        <ul>
          {pool.conditions.map((c) => (
            <li key={c.type}>
              <strong>{c.type}</strong> {c.status} {c.reason && `(${c.reason})`}{" "}
              <span class="small muted">{c.message}</span>
            </li>
          ))}
        </ul>
      </div>
      <div class="card">
        <h2>Pods</h2>
        {pool.pods.length === 0 ? (
          <p class="muted">No pods{pool.desiredReplicas === 0 ? " (scaled to zero)" : " yet"}.</p>
        ) : (
          <table class="grid">
            <thead>
              <tr>
                <th scope="col">Pod</th>
                <th scope="col">Phase</th>
                <th scope="col">Slots busy / total</th>
                <th scope="col">Deletion cost</th>
              </tr>
            </thead>
            <tbody>
              {pool.pods.map((p) => (
                <tr key={p.name}>
                  <td class="mono">{p.name}</td>
                  <td>
                    {p.phase}
                    {p.ready ? " · ready" : ""}
                    {p.draining ? " · draining" : ""}
                  </td>
                  <td>{p.slots === null ? "—" : `${p.busy} / ${p.slots}`}</td>
                  <td>{p.deletionCost ?? "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
    </section>
  );
}

/**
 * The failure rate of each version between consecutive samples (failures ÷ attempts each ended
 * in that interval; null where it ended none), and the canary's weight then.
 */
export function rolloutRates(history: RolloutSample[]) {
  const rate = (f: number, a: number) => (a > 0 ? Math.round((1000 * f) / a) / 10 : null);
  const out: { at: number; stable: number | null; canary: number | null; weight: number }[] = [];
  for (let i = 1; i < history.length; i++) {
    const [a, b] = [history[i - 1]!, history[i]!];
    out.push({
      at: b.at,
      stable: rate(b.stable.failed - a.stable.failed, b.stable.attempts - a.stable.attempts),
      canary: rate(b.canary.failed - a.canary.failed, b.canary.attempts - a.canary.attempts),
      weight: b.weight,
    });
  }
  return out;
}

const short = (hash: string | null) => (hash ? hash.slice(0, 12) : "—");
const pctOf = (r: number) => `${(r * 100).toFixed(1)}%`;

function RolloutCard({ rollout: r, focus }: { rollout: Rollout; focus: boolean }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (focus) ref.current?.scrollIntoView({ block: "start" });
  }, [focus]);
  const progressing = r.phase === "Progressing";
  const rates = rolloutRates(r.history ?? []);
  const row = (name: string, hash: string | null, f: VersionFigures | null | undefined) => (
    <tr data-version={name}>
      <th scope="row">{name}</th>
      <td class="mono">{short(hash)}</td>
      <td class="n">{f ? f.attempts : "—"}</td>
      <td class="n">{f ? f.failed : "—"}</td>
      <td class="n">{f ? pctOf(f.failureRate) : "—"}</td>
      <td class="n">{f?.p95Ms !== undefined ? `${f.p95Ms} ms` : "—"}</td>
    </tr>
  );
  return (
    <div class="card rollout" id="rollout" data-phase={r.phase} ref={ref}>
      <h2>Rollout</h2>
      <dl class="counts">
        <div>
          <dt>phase</dt>
          <dd>{r.phase}</dd>
        </div>
        <div>
          <dt>step</dt>
          <dd data-step>{progressing ? `${r.step + 1} / ${r.steps.length}` : r.summary || "—"}</dd>
        </div>
        <div>
          <dt>weights</dt>
          <dd data-weights>
            {r.steps.map((s, i) => (
              <span key={i} class={progressing && i === r.step ? "current" : ""}>
                {i > 0 ? " → " : ""}
                {progressing && i === r.step ? <strong>{s.weight}%</strong> : `${s.weight}%`}
              </span>
            ))}
            {" → 100%"}
          </dd>
        </div>
        <div>
          <dt>step started</dt>
          <dd title={time(r.stepStartedAt)}>{r.stepStartedAt ? ago(r.stepStartedAt) : "—"}</dd>
        </div>
      </dl>
      <table class="grid versions">
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col">Template</th>
            <th scope="col" class="n">
              Jobs (attempts)
            </th>
            <th scope="col" class="n">
              Failed
            </th>
            <th scope="col" class="n">
              Failure rate
            </th>
            <th scope="col" class="n">
              p95 run time
            </th>
          </tr>
        </thead>
        <tbody>
          {row("stable", r.stableHash, r.stable)}
          {row("canary", r.canaryHash, r.canary)}
        </tbody>
      </table>
      <p class="small muted">
        {progressing
          ? `Over the current step (since ${time(r.stepStartedAt)}): the attempts each version ended, the handler's failures among them, and the p95 of the completed ones' run time — what the operator judges the step on.`
          : "No step is in progress."}
      </p>
      {r.message && (
        <p class="small" data-verdict={r.verdict ?? ""}>
          <strong>{r.verdict ?? r.phase}</strong>: {r.message}
        </p>
      )}
      <h3>Failure rates</h3>
      {rates.length === 0 ? (
        <p class="muted">No samples of this rollout yet.</p>
      ) : (
        <Chart
          x={rates.map((p) => p.at)}
          series={[
            { label: "stable failure %", values: rates.map((p) => p.stable), color: "#57c" },
            { label: "canary failure %", values: rates.map((p) => p.canary), color: "#d33" },
            {
              label: "canary weight %",
              values: rates.map((p) => p.weight),
              color: "#999",
              step: true,
              axis: "right",
              dash: [4, 4],
            },
          ]}
          axes={{ left: "failure %", right: "weight %" }}
          height={180}
        />
      )}
      <p class="small muted">
        Each point: the handler's failures ÷ the attempts that version ended in the{" "}
        {r.sampleSeconds ? `${r.sampleSeconds} s` : "interval"} before it (no point where it ended none),
        sampled by the API while the rollout is in progress, over its last hour. The dashed line is the
        canary's weight: each rise is a step boundary.
      </p>
    </div>
  );
}
