// One queue: its jobs by state, newest first, paged on the server by cursor; time filter;
// bulk retry / cancel / delete of a selection (delete after a confirmation); live workers;
// jobs/min and durations per minute, zoomed to the span that had jobs, or 15 min / 1 h / 6 h.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, q, throttle, useLive, may } from "../api.ts";
import type {
  JobListItem,
  ListJobsReply,
  QueueStatsReply,
  QueueSummary,
  QueueWorkersReply,
  SessionReply as Session,
} from "../apiTypes.generated.ts";
import { ago, Chart, Confirm, duration, ErrorNote, num, Progress, StateBadge, time } from "../ui.tsx";
import { GroupsCard } from "./groups.tsx";
import { QueueActions } from "./queues.tsx";

type Worker = QueueWorkersReply["workers"][number];

const STATES = ["all", "ready", "delayed", "active", "completed", "dead", "cancelled", "deleted"] as const;
/** Tabs answered from the records only (PostgreSQL). */
const HISTORY_ONLY: readonly string[] = ["all", "cancelled", "deleted"];
type Minute = QueueStatsReply["minutes"][number];

/** The chart's spans: "active" is the last hour cut to where it had jobs; the others are whole. */
const RANGES = [
  ["active", "active"],
  ["15m", "15 m"],
  ["1h", "1 h"],
  ["6h", "6 h"],
] as const;
type Range = (typeof RANGES)[number][0];
/** The shortest span the active range shows: a busy minute beside the quiet one before it. */
const ACTIVE_MIN_MINUTES = 3;

/**
 * The minutes from shortly before the first that had a job (finished or failed) to now: an
 * hour of zeros before a burst says nothing. Null when none had one.
 */
export function activeSpan(minutes: Minute[]): Minute[] | null {
  const first = minutes.findIndex((m) => m.completed > 0 || m.failed > 0);
  if (first < 0) return null;
  const start = Math.max(0, Math.min(first - 1, minutes.length - ACTIVE_MIN_MINUTES));
  return minutes.slice(start);
}

const WINDOWS: [string, number | null][] = [
  ["any time", null],
  ["last 15 min", 15 * 60_000],
  ["last hour", 3600_000],
  ["last 24 h", 86_400_000],
];

export function QueuePage({
  queue,
  params,
  session,
}: {
  queue: string;
  params: URLSearchParams;
  session: Session;
}) {
  const state = (params.get("state") ?? (session.history ? "all" : "ready")) as (typeof STATES)[number];
  const windowMs = Number(params.get("window") ?? 0) || null;
  const [summary, setSummary] = useState<QueueSummary | null>(null);
  const [pages, setPages] = useState<string[]>([]); // cursors of the pages before this one
  const [cursor, setCursor] = useState<string | null>(null);
  const [jobs, setJobs] = useState<{ items: JobListItem[]; next: string | null } | null>(null);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [workers, setWorkers] = useState<Worker[]>([]);
  const range = (RANGES.find(([r]) => r === params.get("range"))?.[0] ?? "active") as Range;
  const [minutes, setMinutes] = useState<Minute[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [confirmDelete, setConfirmDelete] = useState(false);

  const setParam = (k: string, v: string | null) => {
    const p = new URLSearchParams(params);
    if (v === null) p.delete(k);
    else p.set(k, v);
    location.hash = `#/queue/${q(queue)}?${p}`;
  };

  const loadJobs = (c: string | null = cursor) => {
    const p = new URLSearchParams({ state, limit: "50" });
    if (c) p.set("cursor", c);
    if (windowMs && session.history) p.set("from", String(Date.now() - windowMs));
    return api<ListJobsReply>(`/queues/${q(queue)}/jobs?${p}`)
      .then((r) => {
        setJobs(r);
        setError(null);
      })
      .catch((e: Error) => setError(e.message));
  };
  const loadSummary = () =>
    api<QueueSummary>(`/queues/${q(queue)}`)
      .then(setSummary)
      .catch(() => {});
  const loadWorkers = () =>
    api<QueueWorkersReply>(`/queues/${q(queue)}/workers`)
      .then((r) => setWorkers(r.workers))
      .catch(() => {});
  const [refresh] = useState(() =>
    throttle(() => {
      void loadSummary();
      void loadWorkers();
    }, 500),
  );
  // The first page follows events; older pages stay put while the user reads them.
  const firstPage = useRef<() => void>(() => {});
  firstPage.current = () => {
    if (cursor === null) void loadJobs(null);
  };
  const [refreshFirstPage] = useState(() => throttle(() => firstPage.current(), 1000));

  useEffect(() => {
    setCursor(null);
    setPages([]);
    setSelected(new Set());
    void loadJobs(null);
  }, [state, windowMs]);
  useEffect(() => {
    void loadSummary();
    void loadWorkers();
  }, []);
  useEffect(() => {
    if (!session.history) return;
    // The window's minutes (zero-filled by the API), read again as the minutes pass.
    const window = range === "active" ? "1h" : range;
    const loadStats = () =>
      void api<QueueStatsReply>(`/queues/${q(queue)}/stats?window=${window}`)
        .then((r) => setMinutes(r.minutes))
        .catch(() => {});
    loadStats();
    const t = setInterval(loadStats, 30_000);
    return () => clearInterval(t);
  }, [range]);
  const shown = minutes && (range === "active" ? activeSpan(minutes) : minutes);
  useLive((e) => {
    if ((e as { queue?: string }).queue !== queue) return;
    refresh();
    refreshFirstPage();
  });

  const go = (c: string | null, back = false) => {
    if (back) setPages((p) => p.slice(0, -1));
    else setPages((p) => [...p, cursor ?? ""]);
    setCursor(c);
    setSelected(new Set());
    void loadJobs(c);
  };

  const bulk = async (kind: "retry" | "cancel" | "delete") => {
    setNotice(null);
    const ids = [...selected];
    const path = { retry: "dead/retry", cancel: "cancel", delete: "delete" }[kind];
    try {
      const r = await api<{
        retried?: number;
        cancelled?: number;
        deleted?: number;
        refused?: { id: string; reason: string }[];
      }>(`/queues/${q(queue)}/${path}`, { method: "POST", body: { ids } });
      const refused = r.refused ?? [];
      setNotice(
        kind === "retry"
          ? `${r.retried} retried`
          : kind === "cancel"
            ? `${r.cancelled} cancelled`
            : `${r.deleted} deleted` +
              (refused.length > 0
                ? `; ${refused.length} refused (${refused.map((x) => `${x.id}: ${x.reason}`).join("; ")})`
                : ""),
      );
      setSelected(new Set(refused.map((x) => x.id)));
      void loadJobs();
    } catch (e) {
      setError((e as Error).message);
    }
  };

  // Deleted jobs are history only: nothing left to act on.
  const selectable = may(session, "operate") && state !== "deleted";

  const toggle = (id: string) =>
    setSelected((s) => {
      const n = new Set(s);
      if (n.has(id)) n.delete(id);
      else n.add(id);
      return n;
    });

  return (
    <section>
      <p class="crumbs">
        <a href="#/">Queues</a> / <span>{queue}</span>
      </p>
      <div class="row spread">
        <h1>{queue}</h1>
        {summary && <QueueActions s={summary} session={session} onDone={() => void loadSummary()} />}
      </div>
      {summary && (
        <dl class="counts">
          {(["ready", "delayed", "inflight", "completed", "dead", "cancelled"] as const).map((k) => (
            <div key={k}>
              <dt>{k === "inflight" ? "in flight" : k}</dt>
              <dd data-count={k}>{num(summary[k])}</dd>
            </div>
          ))}
        </dl>
      )}
      {session.history && minutes && (
        <div class="card" data-range={range}>
          <div class="row spread">
            <h2>
              {range === "active"
                ? shown
                  ? `Since ${new Date(shown[0]!.minute).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", hourCycle: "h23" })}`
                  : "Last hour"
                : `Last ${RANGES.find(([r]) => r === range)![1]}`}
            </h2>
            <div role="tablist" aria-label="chart span" class="tabs small">
              {RANGES.map(([r, label]) => (
                <button
                  key={r}
                  type="button"
                  role="tab"
                  aria-selected={r === range}
                  title={r === "active" ? "the last hour, from its first job" : undefined}
                  onClick={() => setParam("range", r === "active" ? null : r)}
                >
                  {label}
                </button>
              ))}
            </div>
          </div>
          {!shown || shown.every((m) => m.completed === 0 && m.failed === 0) ? (
            <p class="muted empty-chart">
              No job finished in the{" "}
              {range === "active" || range === "1h"
                ? "last hour"
                : `last ${RANGES.find(([r]) => r === range)![1]}`}
              .
            </p>
          ) : (
            <MinutesChart minutes={shown} />
          )}
        </div>
      )}
      <div class="row">
        <div role="tablist" aria-label="job state" class="tabs">
          {STATES.filter((s) => session.history || !HISTORY_ONLY.includes(s)).map((s) => (
            <button
              key={s}
              type="button"
              role="tab"
              aria-selected={s === state}
              onClick={() => setParam("state", s)}
            >
              {s}
            </button>
          ))}
        </div>
        {session.history && (
          <label class="small">
            Updated{" "}
            <select
              value={String(windowMs ?? "")}
              onChange={(e) => setParam("window", (e.target as HTMLSelectElement).value || null)}
            >
              {WINDOWS.map(([label, ms]) => (
                <option key={label} value={ms === null ? "" : String(ms)}>
                  {label}
                </option>
              ))}
            </select>
          </label>
        )}
        {selectable && selected.size > 0 && (
          <span class="actions">
            <span class="small">{selected.size} selected</span>
            <button type="button" onClick={() => void bulk("retry")}>
              Retry selected
            </button>
            <button type="button" class="danger" onClick={() => void bulk("cancel")}>
              Cancel selected
            </button>
            {may(session, "admin") && (
              <button type="button" class="danger" onClick={() => setConfirmDelete(true)}>
                Delete selected
              </button>
            )}
          </span>
        )}
        <Confirm
          open={confirmDelete}
          title={`Delete ${selected.size} job${selected.size === 1 ? "" : "s"} of ${queue}?`}
          confirmLabel="Delete"
          onClose={() => setConfirmDelete(false)}
          onConfirm={() => {
            setConfirmDelete(false);
            void bulk("delete");
          }}
        >
          <p>
            They leave the queue and Redis; their records stay, marked deleted. Running jobs are refused:
            cancel them first. This cannot be undone.
          </p>
        </Confirm>
      </div>
      <ErrorNote error={error} />
      {summary?.served === false && (
        <p class="error" data-warning="not-served">
          No worker has claimed from this queue: its jobs wait for a worker that may never come. Is the queue
          name right (a typo), is its pool deployed?
        </p>
      )}
      {notice && <p class="notice">{notice}</p>}
      {!jobs ? (
        <p class="muted">Loading…</p>
      ) : jobs.items.length === 0 ? (
        <p class="muted empty">No {state === "all" ? "" : state + " "}jobs.</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              {selectable && (
                <th scope="col">
                  <input
                    type="checkbox"
                    aria-label="select all on this page"
                    checked={jobs.items.every((j) => selected.has(j.id))}
                    onChange={(e) =>
                      setSelected(
                        (e.target as HTMLInputElement).checked
                          ? new Set(jobs.items.map((j) => j.id))
                          : new Set(),
                      )
                    }
                  />
                </th>
              )}
              <th scope="col">Job</th>
              <th scope="col">State</th>
              <th scope="col">Attempts</th>
              <th scope="col">Progress</th>
              <th scope="col">Created</th>
              <th scope="col">{jobs.items[0]?.updatedAt ? "Updated" : "Started"}</th>
              <th scope="col">Reason</th>
            </tr>
          </thead>
          <tbody>
            {jobs.items.map((j) => (
              <tr key={j.id} data-job={j.id}>
                {selectable && (
                  <td>
                    <input
                      type="checkbox"
                      aria-label={`select ${j.id}`}
                      checked={selected.has(j.id)}
                      onChange={() => toggle(j.id)}
                    />
                  </td>
                )}
                <th scope="row">
                  <a href={`#/job/${q(j.id)}?queue=${q(queue)}`} class="mono">
                    {j.id}
                  </a>
                </th>
                <td>
                  <StateBadge state={j.state === "queued" ? "ready" : j.state} />
                </td>
                <td>
                  {j.attempts}
                  {j.maxAttempts ? ` / ${j.maxAttempts}` : ""}
                </td>
                <td>
                  <Progress value={j.progress ?? null} />
                </td>
                <td title={time(j.createdAt)}>{ago(j.createdAt)}</td>
                <td title={time(j.updatedAt ?? j.startedAt ?? null)}>
                  {ago(j.updatedAt ?? j.startedAt ?? null)}
                </td>
                <td class="small">{j.deadReason ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div class="row">
        <button type="button" disabled={pages.length === 0} onClick={() => go(pages.at(-1) || null, true)}>
          ← Newer
        </button>
        <button type="button" disabled={!jobs?.next} onClick={() => go(jobs!.next)}>
          Older →
        </button>
      </div>
      <GroupsCard
        queue={queue}
        session={session}
        group={params.get("group")}
        onGroup={(g) => setParam("group", g)}
      />
      <div class="card">
        <h2>Workers</h2>
        {workers.length === 0 ? (
          <p class="muted">No live workers.</p>
        ) : (
          <table class="grid">
            <thead>
              <tr>
                <th scope="col">Worker</th>
                <th scope="col">Pod</th>
                <th scope="col">Slots busy / free</th>
                <th scope="col">Last report</th>
                <th scope="col">Draining</th>
              </tr>
            </thead>
            <tbody>
              {workers.map((w) => (
                <tr key={w.id}>
                  <td class="mono">{w.id}</td>
                  <td class="mono">{w.pod}</td>
                  <td>
                    {w.busy} / {w.free}
                  </td>
                  <td>{ago(Date.now() - w.lastSeenMs)}</td>
                  <td>{w.draining ? "draining" : "no"}</td>
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
 * Jobs per minute and the minute's p50/p95 duration, each a step: a minute's figure holds for
 * that minute, never a ramp to the next. The last minute holds until now (as of this read), or
 * to its end when it closed since the API read it, so its figures read as a step too, not as a
 * line at the edge.
 */
function MinutesChart({ minutes }: { minutes: Minute[] }) {
  const closed = useMemo(() => {
    const last = minutes.at(-1)!;
    const now = Date.now();
    return now > last.minute
      ? [...minutes, { ...last, minute: Math.min(now, last.minute + 60_000) }]
      : minutes;
  }, [minutes]);
  return (
    <Chart
      x={closed.map((m) => m.minute)}
      series={[
        {
          label: "completed/min",
          values: closed.map((m) => m.completed),
          color: "#2a7",
          fill: "rgba(34, 170, 119, 0.15)",
          step: true,
        },
        {
          label: "failed/min",
          values: closed.map((m) => m.failed),
          color: "#d44",
          dash: [6, 4],
          step: true,
        },
        { label: "p50", values: closed.map((m) => m.p50), color: "#9ad", axis: "right", step: true },
        { label: "p95", values: closed.map((m) => m.p95), color: "#57c", axis: "right", step: true },
      ]}
      axes={{ left: "jobs/min", right: "duration", rightValue: duration, counts: ["left"] }}
      tickSeconds={60}
      height={180}
    />
  );
}
