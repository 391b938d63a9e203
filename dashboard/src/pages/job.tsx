// One job: state, progress (moves live with the handler's reports), attempts and every
// execution, the event timeline, payload and result/error, logs, fan-out children, actions.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, q, throttle, useLive, may } from "../api.ts";
import type { JobDetailReply, SessionReply as Session, Shown } from "../apiTypes.generated.ts";
import { ago, duration, ErrorNote, JsonBlock, Progress, StateBadge, time } from "../ui.tsx";

export function JobPage({ id, queue, session }: { id: string; queue: string | null; session: Session }) {
  const [job, setJob] = useState<JobDetailReply | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const path = `/jobs/${q(id)}`;
  const qs = queue ? `?queue=${q(queue)}` : "";
  const load = () =>
    api<JobDetailReply>(`${path}/detail${qs}`)
      .then((d) => {
        setJob(d);
        setError(null);
      })
      .catch((e: Error) => setError(e.message));
  const [reload] = useState(() => throttle(() => void loadRef.current(), 400));
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    void load();
  }, []);
  useLive((e) => {
    const ev = e as { id?: string; type: string; progress?: string; message?: string };
    if (ev.id !== id) return;
    if (ev.type === "progress" && ev.progress !== undefined)
      setJob((j) =>
        j ? { ...j, progress: Number(ev.progress), progressMessage: ev.message ?? j.progressMessage } : j,
      );
    reload();
  });

  const act = async (kind: "retry" | "cancel" | "promote") => {
    setNotice(null);
    try {
      await api(`${path}/${kind}?queue=${q(job!.queue)}`, { method: "POST" });
      setNotice(
        kind === "retry"
          ? "Retried: the job is ready again."
          : kind === "cancel"
            ? "Cancelled."
            : "Promoted: it runs now.",
      );
      void load();
    } catch (e) {
      setError((e as Error).message);
    }
  };

  if (!job) return error ? <ErrorNote error={error} /> : <p class="muted">Loading…</p>;
  const dl = (part: string) => `${path}/payload?queue=${q(job.queue)}&part=${part}`;
  return (
    <section>
      <p class="crumbs">
        <a href="#/">Queues</a> / <a href={`#/queue/${q(job.queue)}`}>{job.queue}</a> /{" "}
        <span class="mono">{job.id}</span>
      </p>
      <div class="row spread">
        <h1 class="mono">{job.id}</h1>
        {may(session, "operate") && (
          <span class="actions">
            {job.actions.retry && (
              <button type="button" class="primary" onClick={() => void act("retry")}>
                Retry
              </button>
            )}
            {job.actions.promote && (
              <button type="button" onClick={() => void act("promote")}>
                Run now
              </button>
            )}
            {job.actions.cancel && (
              <button type="button" class="danger" onClick={() => void act("cancel")}>
                Cancel
              </button>
            )}
          </span>
        )}
      </div>
      <ErrorNote error={error} />
      {notice && <p class="notice">{notice}</p>}
      <dl class="facts">
        <div>
          <dt>State</dt>
          <dd data-field="state">
            <StateBadge state={job.state} />
          </dd>
        </div>
        <div>
          <dt>Progress</dt>
          <dd data-field="progress">
            <Progress value={job.progress} message={job.progressMessage} />
          </dd>
        </div>
        <div>
          <dt>{job.stages.length > 1 ? "Attempts (this stage)" : "Attempts"}</dt>
          <dd data-field="attempts">
            {job.attempts}
            {job.maxAttempts ? ` of ${job.maxAttempts}` : ""}
            {job.stalls ? ` · ${job.stalls} stalls` : ""}
          </dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd title={time(job.createdAt)}>{ago(job.createdAt)}</dd>
        </div>
        <div>
          <dt>Started</dt>
          <dd title={time(job.startedAt)}>{ago(job.startedAt)}</dd>
        </div>
        <div>
          <dt>Finished</dt>
          <dd title={time(job.finishedAt)}>{ago(job.finishedAt)}</dd>
        </div>
        {job.idempotencyKey && (
          <div>
            <dt>Idempotency key</dt>
            <dd class="mono" data-field="idempotencyKey">
              {job.idempotencyKey}
            </dd>
          </div>
        )}
        {job.task && (
          <div>
            <dt>Task</dt>
            <dd class="mono" data-field="task">
              {job.task}
            </dd>
          </div>
        )}
        {job.deadReason && (
          <div>
            <dt>Dead because</dt>
            <dd>{job.deadReason}</dd>
          </div>
        )}
        {job.flow && (
          <div>
            <dt>Flow</dt>
            <dd data-field="flow">
              <a class="mono" href={`#/flow/${q(job.flow.id)}`}>
                {job.flow.id}
              </a>{" "}
              <span class="muted">
                as <span class="mono">{job.flow.key}</span>
              </span>
            </dd>
          </div>
        )}
        {job.parentId && (
          <div>
            <dt>Fanned out by</dt>
            <dd>
              <a class="mono" href={`#/job/${q(job.parentId)}`}>
                {job.parentId}
              </a>
            </dd>
          </div>
        )}
      </dl>
      <div class="cols">
        <div class="card">
          <h2>Payload</h2>
          <JsonBlock value={job.data} download={dl("data")} />
        </div>
        <div class="card">
          <h2>{job.error && !job.result ? "Error" : "Result"}</h2>
          <JsonBlock
            value={job.error && !job.result ? job.error : job.result}
            download={dl(job.error && !job.result ? "error" : "result")}
          />
        </div>
      </div>
      {job.stages.length > 1 && (
        <div class="card" data-section="stages">
          <h2>Stages</h2>
          <p class="small muted">
            What each stage of the pipeline received and returned, and its attempts. The counters above are
            the current stage's: a stage advance starts them afresh.
          </p>
          {job.stages.map((st) => (
            <div key={st.queue} data-stage={st.queue}>
              <h3>
                {st.queue} — <StateBadge state={st.state} />{" "}
                <span data-field="stage-attempts">
                  {st.attempts} attempt{st.attempts === 1 ? "" : "s"}
                </span>
              </h3>
              <div class="cols">
                <div>
                  <h4>Input</h4>
                  <JsonBlock value={st.data} />
                </div>
                <div>
                  <h4>{st.error && !st.result ? "Last error" : "Result"}</h4>
                  <JsonBlock value={st.error && !st.result ? st.error : st.result} />
                </div>
              </div>
            </div>
          ))}
        </div>
      )}
      {job.previousErrors.length > 0 && (
        <div class="card" data-section="previous-errors">
          <h2>Failed attempts</h2>
          <p class="small muted">
            This stage's last failed attempts, as its next attempt is told them (previousErrors).
          </p>
          <table class="grid">
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Kind</th>
                <th scope="col">At</th>
                <th scope="col">What went wrong</th>
              </tr>
            </thead>
            <tbody>
              {job.previousErrors.map((e) => (
                <tr key={`${e.attempt}-${e.at}`} data-attempt={e.attempt} data-kind={e.kind}>
                  <td>{e.attempt}</td>
                  <td>
                    <StateBadge state={e.kind} />
                  </td>
                  <td>{time(new Date(e.at).toISOString())}</td>
                  <td class="small">
                    {e.message}
                    {(e.details ?? []).length > 0 && (
                      <ul class="violations">
                        {(e.details as { pointer?: string; message?: string }[]).map((d, i) => (
                          <li key={i}>
                            <code class="warn" data-pointer={d.pointer ?? ""}>
                              {d.pointer || "/"}
                            </code>{" "}
                            {d.message ?? JSON.stringify(d)}
                          </li>
                        ))}
                      </ul>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {job.rejected && (
            <>
              <h3>Rejected result</h3>
              <JsonBlock value={job.rejected} />
            </>
          )}
        </div>
      )}
      <div class="card">
        <h2>Executions</h2>
        {job.executions.length === 0 ? (
          <p class="muted">
            {job.sources.records ? "None yet." : "Executions are recorded in PostgreSQL (not configured)."}
          </p>
        ) : (
          <table class="grid">
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Worker</th>
                <th scope="col">Started</th>
                <th scope="col">Took</th>
                <th scope="col">Outcome</th>
                <th scope="col">Cause / error</th>
              </tr>
            </thead>
            <tbody>
              {job.executions.map((x) => (
                <tr key={x.execution}>
                  <td>{x.attempt ?? "—"}</td>
                  <td class="mono small">{x.worker ?? "—"}</td>
                  <td>{time(x.startedAt)}</td>
                  <td>
                    {x.startedAt && x.finishedAt
                      ? duration(Date.parse(x.finishedAt) - Date.parse(x.startedAt))
                      : "—"}
                  </td>
                  <td>
                    <StateBadge state={x.outcome} />
                  </td>
                  <td class="small">{x.reason ?? x.error?.slice(0, 200) ?? ""}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
      {job.notifications.length > 0 && (
        <div class="card" data-section="notifications">
          <h2>Notifications</h2>
          <table class="grid">
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Destination</th>
                <th scope="col">State</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last attempt</th>
                <th scope="col">Last answer</th>
              </tr>
            </thead>
            <tbody>
              {job.notifications.map((n) => (
                <tr key={`${n.event} ${n.url} ${n.firstAt}`} data-event={n.event} data-state={n.state}>
                  <td>{n.event}</td>
                  <td class="mono small">{n.url}</td>
                  <td>
                    <StateBadge state={n.state} />
                    {n.state === "retrying" && n.nextAt && (
                      <span class="small muted"> next {time(n.nextAt)}</span>
                    )}
                  </td>
                  <td>{n.attempts}</td>
                  <td>{time(n.lastAt)}</td>
                  <td class="small" data-status={n.status}>
                    {n.status > 0 ? `${n.status} ` : ""}
                    {n.answer}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div class="cols">
        <div class="card">
          <h2>Timeline</h2>
          {job.eventsTrimmed && (
            <p class="small muted" data-note="trimmed">
              {job.sources.records
                ? "Older entries are no longer in this queue's event stream (trimmed, or written by an earlier stage); those marked “records” come from the job records."
                : "Older entries are no longer in this queue's event stream (trimmed, or written by an earlier stage)."}
            </p>
          )}
          {job.events.length === 0 ? (
            <p class="muted">No recent events in the queue's stream.</p>
          ) : (
            <ol class="timeline">
              {job.events.map((e) => (
                <li key={e.eventId} data-event={e.type} data-source={e.source ?? "stream"}>
                  <span class="mono small">
                    {new Date(Number(e.at ?? e.eventId.split("-")[0])).toLocaleTimeString("en-GB")}
                  </span>{" "}
                  <strong>{e.type}</strong>
                  {e.type === "progress" &&
                    e.progress !== undefined &&
                    ` ${Math.round(Number(e.progress) * 100)}%`}
                  {typeof e.reason === "string" && ` — ${e.reason}`}
                  {e.source === "records" && <span class="small muted"> (records)</span>}
                </li>
              ))}
            </ol>
          )}
        </div>
        <div class="card">
          <h2>Logs</h2>
          {job.logs.length === 0 ? (
            <p class="muted">The handler wrote no log lines.</p>
          ) : (
            <pre class="logs">
              {job.logs.map((l) => `${new Date(l.at).toLocaleTimeString("en-GB")}  ${l.message}`).join("\n")}
            </pre>
          )}
        </div>
      </div>
      {job.children.length > 0 && (
        <div class="card">
          <h2>Fan-out children</h2>
          <ul>
            {job.children.map((c) => (
              <li key={c.id}>
                <a class="mono" href={`#/job/${q(c.id)}?queue=${q(c.queue)}`}>
                  {c.id}
                </a>{" "}
                {c.queue} <StateBadge state={c.state} />
              </li>
            ))}
          </ul>
        </div>
      )}
    </section>
  );
}
