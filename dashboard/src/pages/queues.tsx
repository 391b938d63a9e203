// Every queue at a glance: live counts (pushed: each event refetches its queue's counts),
// jobs/min and p95 duration over the last hour, oldest waiting job, and the queue actions.
import { useEffect, useState } from "preact/hooks";
import { api, q, throttle, useLive, may } from "../api.ts";
import type {
  ListQueuesReply,
  QueueStatsReply,
  QueueSummary,
  SessionReply as Session,
} from "../apiTypes.generated.ts";
import { Confirm, duration, ErrorNote, num, Sparkline } from "../ui.tsx";

type Minute = QueueStatsReply["minutes"][number];

/**
 * Jobs completed in the last 60 s: the current minute so far plus the part of the previous
 * minute that is still within the last 60 s (the minutes are whole; the window slides).
 */
export function lastMinute(minutes: Minute[], now = Date.now()): number | null {
  const current = minutes.at(-1);
  if (!current) return null;
  const elapsed = Math.min(1, Math.max(0, (now - current.minute) / 60_000));
  return Math.round(current.completed + (minutes.at(-2)?.completed ?? 0) * (1 - elapsed));
}

/** A fallback for counts only, in case the event stream is cut by a proxy. */
const SLOW_REFRESH_MS = 30_000;
/** How often a queue's per-minute rates are read again while its jobs complete. */
const STATS_ON_EVENTS_MS = 5_000;

export type QueueAction = { kind: "retry" | "purge" | "pause" | "resume"; queue: string };

export function QueueActions({
  s,
  session,
  onDone,
}: {
  s: QueueSummary;
  session: Session;
  onDone: () => void;
}) {
  const [confirm, setConfirm] = useState<QueueAction | null>(null);
  const [error, setError] = useState<string | null>(null);
  if (!may(session, "operate")) return null;
  const run = async (a: QueueAction) => {
    setError(null);
    try {
      if (a.kind === "retry") await api(`/queues/${q(a.queue)}/dead/retry`, { method: "POST", body: {} });
      else if (a.kind === "purge") await api(`/queues/${q(a.queue)}/dead`, { method: "DELETE" });
      else await api(`/queues/${q(a.queue)}/${a.kind}`, { method: "POST" });
      onDone();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <span class="actions">
      {s.paused ? (
        <button type="button" onClick={() => run({ kind: "resume", queue: s.queue })}>
          Resume
        </button>
      ) : (
        <button type="button" onClick={() => run({ kind: "pause", queue: s.queue })}>
          Pause
        </button>
      )}
      <button
        type="button"
        disabled={s.dead === 0}
        onClick={() => setConfirm({ kind: "retry", queue: s.queue })}
      >
        Retry dead
      </button>
      {may(session, "admin") && (
        <button
          type="button"
          class="danger"
          disabled={s.dead === 0}
          onClick={() => setConfirm({ kind: "purge", queue: s.queue })}
        >
          Purge dead
        </button>
      )}
      <Confirm
        open={confirm !== null}
        title={
          confirm?.kind === "purge" ? `Purge dead jobs of ${s.queue}?` : `Retry dead jobs of ${s.queue}?`
        }
        confirmLabel={confirm?.kind === "purge" ? "Purge" : "Retry all"}
        onClose={() => setConfirm(null)}
        onConfirm={() => {
          const a = confirm!;
          setConfirm(null);
          void run(a);
        }}
      >
        <p>
          {confirm?.kind === "purge"
            ? `${num(s.dead)} dead jobs will be deleted. This cannot be undone.`
            : `${num(s.dead)} dead jobs go back to ready and run again.`}
        </p>
      </Confirm>
      <ErrorNote error={error} />
    </span>
  );
}

export function QueuesPage({ session }: { session: Session }) {
  const [queues, setQueues] = useState<QueueSummary[] | null>(null);
  const [stats, setStats] = useState<Record<string, Minute[]>>({});
  const [error, setError] = useState<string | null>(null);

  const loadAll = () =>
    api<ListQueuesReply>("/queues")
      .then((r) => {
        setQueues(r.queues);
        setError(null);
      })
      .catch((e: Error) => setError(e.message));
  const loadOne = (name: string) =>
    api<QueueSummary>(`/queues/${q(name)}`)
      .then((s) => setQueues((list) => (list ?? []).map((x) => (x.queue === name ? { ...x, ...s } : x))))
      .catch(() => {});
  const [pending] = useState(() => new Map<string, () => void>());
  const [reloadAll] = useState(() => throttle(() => void loadAll(), 300));

  useEffect(() => {
    void loadAll();
    const t = setInterval(() => void loadAll(), SLOW_REFRESH_MS);
    return () => clearInterval(t);
  }, []);
  // The per-minute rates move every minute: read again at the slow refresh, not only once.
  const names = queues?.map((x) => x.queue).join(",") ?? "";
  useEffect(() => {
    if (!names || !session.history) return;
    const loadStats = () => {
      for (const name of names.split(",").slice(0, 50))
        void api<QueueStatsReply>(`/queues/${q(name)}/stats`)
          .then((r) => setStats((m) => ({ ...m, [name]: r.minutes })))
          .catch(() => {});
    };
    loadStats();
    const t = setInterval(loadStats, SLOW_REFRESH_MS);
    return () => clearInterval(t);
  }, [names]);
  // While a queue's jobs finish, its rate is read again every few seconds (a page opened at the
  // start of a burst would otherwise show no rate for half a minute while jobs complete).
  const [statsPending] = useState(() => new Map<string, () => void>());
  const loadStatsOf = (name: string) => {
    if (!session.history) return;
    let f = statsPending.get(name);
    if (!f)
      statsPending.set(
        name,
        (f = throttle(
          () =>
            void api<QueueStatsReply>(`/queues/${q(name)}/stats`)
              .then((r) => setStats((m) => ({ ...m, [name]: r.minutes })))
              .catch(() => {}),
          STATS_ON_EVENTS_MS,
        )),
      );
    f();
  };

  useLive((e) => {
    if (e.type === "$queues" || e.type === "$gap") return reloadAll();
    if (e.type.startsWith("$")) return;
    const name = (e as { queue: string }).queue;
    if (!queues?.some((x) => x.queue === name)) return reloadAll();
    let f = pending.get(name);
    if (!f) pending.set(name, (f = throttle(() => void loadOne(name), 250)));
    f();
    if (e.type === "completed" || e.type === "failed") loadStatsOf(name);
  });

  if (!queues) return error ? <ErrorNote error={error} /> : <p class="muted">Loading queues…</p>;
  return (
    <section>
      <h1>Queues</h1>
      <ErrorNote error={error} />
      {queues.length === 0 ? (
        <p class="muted empty">No queues yet. They appear here the moment their first job is enqueued.</p>
      ) : (
        <table class="grid queues">
          <thead>
            <tr>
              <th scope="col">Queue</th>
              <th scope="col" class="n">
                Ready
              </th>
              <th scope="col" class="n">
                Delayed
              </th>
              <th scope="col" class="n">
                In flight
              </th>
              <th scope="col" class="n">
                Completed
              </th>
              <th scope="col" class="n">
                Dead
              </th>
              <th scope="col" class="n">
                Cancelled
              </th>
              <th scope="col">Oldest waiting</th>
              <th scope="col" class="n">
                Workers
              </th>
              <th scope="col">Jobs/min (1 h)</th>
              <th scope="col">p50 / p95</th>
              <th scope="col">State</th>
              {may(session, "operate") && <th scope="col">Actions</th>}
            </tr>
          </thead>
          <tbody>
            {queues.map((s) => {
              const m = stats[s.queue] ?? [];
              const last = m.filter((x) => x.p95 !== null).at(-1);
              return (
                <tr key={s.queue} data-queue={s.queue}>
                  <th scope="row">
                    <a href={`#/queue/${q(s.queue)}`}>{s.queue}</a>
                  </th>
                  <td class="n" data-count="ready">
                    {num(s.ready)}
                  </td>
                  <td class="n" data-count="delayed">
                    {num(s.delayed)}
                  </td>
                  <td class="n" data-count="inflight">
                    {num(s.inflight)}
                  </td>
                  <td class="n" data-count="completed">
                    {num(s.completed)}
                  </td>
                  <td class={`n ${s.dead > 0 ? "warn" : ""}`} data-count="dead">
                    {num(s.dead)}
                  </td>
                  <td class="n" data-count="cancelled">
                    {num(s.cancelled)}
                  </td>
                  <td>{s.oldestWaitingMs === null ? "—" : duration(s.oldestWaitingMs)}</td>
                  <td class="n">{num(s.workers)}</td>
                  <td class="rate" data-rate={lastMinute(m) ?? ""}>
                    <Sparkline
                      values={m.map((x) => x.completed)}
                      title={`completed per minute, ${s.queue}`}
                    />
                    {lastMinute(m) !== null && <span class="small"> {num(lastMinute(m))}</span>}
                  </td>
                  <td class="small">{last ? `${duration(last.p50)} / ${duration(last.p95)}` : "—"}</td>
                  <td>
                    {s.paused ? (
                      <span class="badge state-dead">paused</span>
                    ) : (
                      <span class="badge state-active">running</span>
                    )}
                    {s.rateLimit && <span class="small muted"> ≤ {s.rateLimit}</span>}
                    {s.schedules > 0 && <span class="small muted"> · {s.schedules} scheduled</span>}
                  </td>
                  {may(session, "operate") && (
                    <td>
                      <QueueActions s={s} session={session} onDone={() => void loadOne(s.queue)} />
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}
