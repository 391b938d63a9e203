// Resources (issue 32): each resource of the pipelines shown — its keys' use of every limit now
// and over the last hour (sampled by the API into Redis), benched keys and until when, and the
// jobs waiting for its budget. Refreshed every 10 s.
import { useEffect, useState } from "preact/hooks";
import { api, q } from "../api.ts";
import type { ListResourcesReply, Resource } from "../apiTypes.generated.ts";
import { Chart, ErrorNote, num, time, type Series } from "../ui.tsx";

const COLORS = ["#57c", "#e83", "#3a7", "#c45", "#96c", "#b83", "#4bb", "#777"];
const pct = (n: number) => `${Math.round(n * 1000) / 10} %`;

function windowText(ms: number): string {
  for (const [unit, size] of [
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const)
    if (ms % size === 0) return ms === size ? unit : `${ms / size}${unit}`;
  return `${ms}ms`;
}

function ResourceCard({ r }: { r: Resource }) {
  const id = `res-${r.pipeline}-${r.name}`;
  const units = [...new Set(r.keys.flatMap((k) => k.limits.map((l) => l.unit)))];
  const series: Series[] = r.keys.flatMap((k, i) =>
    k.limits.map((l, j) => ({
      label: `${k.id} ${l.unit}`,
      values: r.history
        .map((s) => (s.keys[k.id]?.[l.unit] ?? null) as number | null)
        .map((v) => (v === null ? null : v * 100)),
      color: COLORS[(i * units.length + j) % COLORS.length]!,
    })),
  );
  const benched = r.keys.filter((k) => k.benchedUntil !== null);
  return (
    <section class="card resource" aria-labelledby={id} data-resource={`${r.pipeline}/${r.name}`}>
      <h2 id={id}>
        {r.name} <span class="muted small">pipeline {r.pipeline}</span>
      </h2>
      <dl class="counts">
        <div>
          <dt>keys</dt>
          <dd>{r.keys.length}</dd>
        </div>
        <div>
          <dt>ceiling</dt>
          <dd>{pct(r.ceiling)}</dd>
        </div>
        <div>
          <dt>waiting for budget</dt>
          <dd data-waiting>{num(r.waiting)}</dd>
        </div>
        <div>
          <dt>benched keys</dt>
          <dd>{benched.length}</dd>
        </div>
      </dl>
      {r.waiting > 0 && (
        <p class="small">
          Jobs waiting for budget:{" "}
          {Object.entries(r.waitingByQueue).map(([queue, n], i) => (
            <span key={queue}>
              {i > 0 && ", "}
              <a href={`#/queue/${q(queue)}`}>{queue}</a> {num(n)}
            </span>
          ))}
        </p>
      )}
      <table class="grid keys">
        <caption class="small muted">Use of each limit in its window ending now</caption>
        <thead>
          <tr>
            <th scope="col">Key</th>
            {units.map((u) => (
              <th scope="col" key={u}>
                {u}
              </th>
            ))}
            <th scope="col">Benched until</th>
            <th scope="col" class="n">
              Admitted
            </th>
          </tr>
        </thead>
        <tbody>
          {r.keys.map((k) => (
            <tr key={k.id} data-key={k.id} class={k.benchedUntil !== null ? "warn" : ""}>
              <th scope="row" class="mono">
                {k.id}
              </th>
              {units.map((u) => {
                const l = k.limits.find((x) => x.unit === u);
                if (!l) return <td key={u}>—</td>;
                const label = `${k.id} ${u}: ${num(l.used)} of ${num(l.max)} per ${windowText(l.windowMs)}`;
                return (
                  <td key={u} data-limit={u}>
                    <meter
                      min={0}
                      max={1}
                      high={r.ceiling * 0.95}
                      optimum={0}
                      value={Math.min(1, l.utilization)}
                      aria-label={label}
                      title={label}
                    />{" "}
                    {pct(l.utilization)}{" "}
                    <span class="small muted">
                      {num(l.used)} / {num(l.max)} per {windowText(l.windowMs)}
                    </span>
                  </td>
                );
              })}
              <td>{k.benchedUntil !== null ? time(new Date(k.benchedUntil).toISOString()) : "—"}</td>
              <td class="n">{num(k.admitted)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h3>Utilization over the last hour (%)</h3>
      <Chart x={r.history.map((s) => s.at)} series={series} height={160} />
    </section>
  );
}

export function ResourcesPage() {
  const [resources, setResources] = useState<Resource[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = () =>
      api<ListResourcesReply>("/resources")
        .then((r) => {
          setResources(r.resources);
          setError(null);
        })
        .catch((e: Error) => setError(e.message));
    void load();
    const t = setInterval(load, 10_000);
    return () => clearInterval(t);
  }, []);
  if (!resources) return error ? <ErrorNote error={error} /> : <p class="muted">Loading resources…</p>;
  return (
    <section>
      <h1>Resources</h1>
      <ErrorNote error={error} />
      {resources.length === 0 ? (
        <p class="muted empty">
          No resources. Set one with <code>conveyor resource set</code> or a WorkerPool's spec.resources.
        </p>
      ) : (
        resources.map((r) => <ResourceCard key={`${r.pipeline}/${r.name}`} r={r} />)
      )}
    </section>
  );
}
