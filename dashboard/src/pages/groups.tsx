// A queue's groups (docs/protocol.md, "Groups"): the groups with the most waiting jobs — a bounded
// read the API caches for a few seconds, so a queue of 100,000 groups costs what one of 20 does —
// with running / limit, rate, paused and how long the next job has waited; a search by group
// name; one group's next waiting and running jobs; pause (after a confirmation) and resume.
import { useEffect, useState } from "preact/hooks";
import { api, q, may } from "../api.ts";
import type { GroupJobsReply, ListGroupsReply, SessionReply as Session } from "../apiTypes.generated.ts";
import { ago, Confirm, ErrorNote, num } from "../ui.tsx";

const TOP = 20;
const REFRESH_MS = 5000;

export function GroupsCard({
  queue,
  session,
  group,
  onGroup,
}: {
  queue: string;
  session: Session;
  /** The group whose jobs are shown (the page's `group` parameter), or null. */
  group: string | null;
  onGroup: (group: string | null) => void;
}) {
  const [data, setData] = useState<ListGroupsReply | null>(null);
  const [search, setSearch] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [confirmPause, setConfirmPause] = useState<string | null>(null);

  const load = () => {
    const p = new URLSearchParams({ top: String(TOP) });
    if (search) p.set("search", search);
    return api<ListGroupsReply>(`/queues/${q(queue)}/groups?${p}`)
      .then((r) => {
        setData(r);
        setError(null);
      })
      .catch((e: Error) => setError(e.message));
  };
  useEffect(() => {
    void load();
    const t = setInterval(() => void load(), REFRESH_MS);
    return () => clearInterval(t);
  }, [queue, search]);

  const act = async (g: string, action: "pause" | "resume") => {
    try {
      await api(`/queues/${q(queue)}/groups/${q(g)}/${action}`, { method: "POST" });
      await load();
    } catch (e) {
      setError((e as Error).message);
    }
  };

  // A queue that never had a group shows nothing.
  if (data && data.groups.length === 0 && data.waiting === 0 && !search && !group) return null;
  return (
    <div class="card" data-card="groups">
      <div class="row spread">
        <h2>Groups</h2>
        <form
          role="search"
          onSubmit={(e) => {
            e.preventDefault();
            const v = ((e.currentTarget as HTMLFormElement).elements.namedItem("group") as HTMLInputElement)
              .value;
            setSearch(v.trim());
          }}
        >
          <label class="small">
            Find group <input name="group" type="search" maxLength={128} placeholder="name or prefix" />
          </label>{" "}
          <button type="submit">Find</button>
        </form>
      </div>
      {data && (
        <p class="small muted">
          {num(data.waiting)} jobs waiting in {num(data.groupsWaiting ?? data.groups.length)} group(s); every
          group: concurrency {data.defaultConcurrency ?? "unlimited"}
          {data.defaultRate ? `, rate ${data.defaultRate}` : ""}.{" "}
          {search ? `Groups starting with “${search}”.` : `The ${TOP} with the most waiting jobs.`}
        </p>
      )}
      <ErrorNote error={error} />
      {!data ? (
        <p class="muted">Loading…</p>
      ) : data.groups.length === 0 ? (
        <p class="muted empty">No group {search ? `starts with “${search}”` : "has waiting jobs"}.</p>
      ) : (
        <table class="grid" aria-label="groups">
          <thead>
            <tr>
              <th scope="col">Group</th>
              <th scope="col" class="n">
                Waiting
              </th>
              <th scope="col" class="n">
                Running / limit
              </th>
              <th scope="col">Rate</th>
              <th scope="col">Next job waited</th>
              <th scope="col">Paused</th>
              {may(session, "operate") && <th scope="col">Action</th>}
            </tr>
          </thead>
          <tbody>
            {data.groups.map((g) => (
              <tr key={g.group} data-group={g.group} class={g.group === group ? "selected" : ""}>
                <th scope="row">
                  <a
                    href="#"
                    class="mono"
                    onClick={(e) => {
                      e.preventDefault();
                      onGroup(g.group === group ? null : g.group);
                    }}
                  >
                    {g.group}
                  </a>
                </th>
                <td class="n">{num(g.waiting)}</td>
                <td class="n">
                  {num(g.running)} / {g.concurrency ?? "∞"}
                  {g.override ? " (own)" : ""}
                </td>
                <td>{g.rate ?? "—"}</td>
                <td>{g.waiting > 0 ? ago(g.oldestCreatedAt ?? null) : "—"}</td>
                <td>{g.paused ? <strong>paused</strong> : "—"}</td>
                {may(session, "operate") && (
                  <td>
                    {g.paused ? (
                      <button type="button" onClick={() => void act(g.group, "resume")}>
                        Resume {g.group}
                      </button>
                    ) : (
                      <button type="button" class="danger" onClick={() => setConfirmPause(g.group)}>
                        Pause {g.group}
                      </button>
                    )}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Confirm
        open={confirmPause !== null}
        title={`Pause group ${confirmPause ?? ""} of ${queue}?`}
        confirmLabel="Pause group"
        onClose={() => setConfirmPause(null)}
        onConfirm={() => {
          const g = confirmPause!;
          setConfirmPause(null);
          void act(g, "pause");
        }}
      >
        <p>
          No job of this group starts until it is resumed; its running jobs finish, the other groups go on.
          The operator stops counting its waiting jobs as work it could start.
        </p>
      </Confirm>
      {group && <GroupJobsView queue={queue} group={group} onClose={() => onGroup(null)} />}
    </div>
  );
}

function GroupJobsView({ queue, group, onClose }: { queue: string; group: string; onClose: () => void }) {
  const [data, setData] = useState<GroupJobsReply | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = () =>
      api<GroupJobsReply>(`/queues/${q(queue)}/groups/${q(group)}/jobs?limit=50`)
        .then((r) => {
          setData(r);
          setError(null);
        })
        .catch((e: Error) => setError(e.message));
    void load();
    const t = setInterval(() => void load(), REFRESH_MS);
    return () => clearInterval(t);
  }, [queue, group]);
  return (
    <section aria-label={`jobs of group ${group}`} data-group-jobs={group}>
      <div class="row spread">
        <h3>
          Group <span class="mono">{group}</span>
          {data ? `: ${num(data.waiting)} waiting, ${num(data.running)} running` : ""}
        </h3>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
      <ErrorNote error={error} />
      {!data ? (
        <p class="muted">Loading…</p>
      ) : data.jobs.length === 0 ? (
        <p class="muted empty">No waiting or running jobs.</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">Paused</th>
              <th scope="col">Priority</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {data.jobs.map((j) => (
              <tr key={`${j.state}:${j.id}`} data-job={j.id}>
                <th scope="row">
                  <a href={`#/job/${q(j.id)}?queue=${q(queue)}`} class="mono">
                    {j.id}
                  </a>
                </th>
                <td>{j.state === "ready" ? "waiting" : "running"}</td>
                <td>{j.priority}</td>
                <td>{ago(j.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data && data.waiting > data.jobs.filter((j) => j.state === "ready").length && (
        <p class="small muted">
          The next {data.jobs.filter((j) => j.state === "ready").length} of them, in the order they will run.
        </p>
      )}
    </section>
  );
}
