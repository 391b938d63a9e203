// A group-limited session's home: its groups in each queue it may see — waiting, running,
// paused, limits, and what the records counted finished — and their latest jobs. Queue-wide
// numbers mix in other groups' jobs, so none is shown (the route does not send any).
import { useEffect, useState } from "preact/hooks";
import { api, q, throttle, useLive } from "../api.ts";
import type { GroupsOverviewReply } from "../apiTypes.generated.ts";
import { ago, ErrorNote, num, StateBadge } from "../ui.tsx";

export function TenantPage() {
  const [view, setView] = useState<GroupsOverviewReply | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    api<GroupsOverviewReply>("/groups")
      .then((v) => {
        setView(v);
        setError(null);
      })
      .catch((e: Error) => setError(e.message));
  const [reload] = useState(() => throttle(() => void load(), 1000));
  useLive(() => reload());
  useEffect(() => {
    void load();
  }, []);
  if (!view) return error ? <ErrorNote error={error} /> : <p class="muted">Loading…</p>;
  return (
    <section data-tenant={view.groups.join(",")}>
      <h1>Groups: {view.groups.join(", ")}</h1>
      <ErrorNote error={error} />
      {view.items.length === 0 ? (
        <p class="empty muted">No job of these groups is waiting, running or recorded.</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th scope="col">Queue</th>
              <th scope="col">Group</th>
              <th scope="col">Waiting</th>
              <th scope="col">Running</th>
              <th scope="col">Completed</th>
              <th scope="col">Dead</th>
              <th scope="col">Limit</th>
              <th scope="col">Paused</th>
            </tr>
          </thead>
          <tbody>
            {view.items.map((g) => (
              <tr key={g.queue + "\u0000" + g.group} data-queue={g.queue} data-group={g.group}>
                <th scope="row">{g.queue}</th>
                <td>{g.group}</td>
                <td data-count="waiting">{num(g.waiting)}</td>
                <td data-count="running">{num(g.running)}</td>
                <td data-count="completed">{g.completed === null ? "—" : num(g.completed)}</td>
                <td data-count="dead">{g.dead === null ? "—" : num(g.dead)}</td>
                <td class="small">
                  {g.concurrency === null ? "no limit" : `${g.concurrency} at once`}
                  {g.rate ? `, ${g.rate}` : ""}
                </td>
                <td data-paused={String(g.paused)}>{g.paused ? <span class="badge">paused</span> : "no"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2 class="spaced">Latest jobs</h2>
      {view.recent === null ? (
        <p class="small muted">
          The latest jobs need the job records (PostgreSQL). Search finds a job by id.
        </p>
      ) : view.recent.length === 0 ? (
        <p class="empty muted">No job yet.</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">Queue</th>
              <th scope="col">Group</th>
              <th scope="col">State</th>
              <th scope="col">Changed</th>
            </tr>
          </thead>
          <tbody>
            {view.recent.map((j) => (
              <tr key={j.queue + j.id} data-job={j.id}>
                <th scope="row">
                  <a class="mono" href={`#/job/${q(j.id)}?queue=${q(j.queue)}`}>
                    {j.id}
                  </a>
                </th>
                <td>{j.queue}</td>
                <td>{j.group}</td>
                <td>
                  <StateBadge state={j.state === "queued" ? "ready" : j.state} />
                </td>
                <td>{ago(j.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
