// The audit trail (GET /audit): every state change through the API, newest first, filtered by
// token, verb, target (a queue, or the start of a target) and time. The filters live in the
// address, so a filtered view can be shared.
import { useEffect, useState } from "preact/hooks";
import { api } from "../api.ts";
import type { AuditReply } from "../apiTypes.generated.ts";
import { ErrorNote, time } from "../ui.tsx";

type Row = AuditReply["items"][number];
const WINDOWS: [string, number][] = [
  ["1 hour", 3600_000],
  ["24 hours", 24 * 3600_000],
  ["7 days", 7 * 24 * 3600_000],
  ["all", 0],
];

export function AuditPage({ params }: { params: URLSearchParams }) {
  const [rows, setRows] = useState<Row[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const token = params.get("token") ?? "";
  const verb = params.get("verb") ?? "";
  const target = params.get("target") ?? "";
  const within = Number(params.get("within") ?? 24 * 3600_000);
  useEffect(() => {
    const p = new URLSearchParams({ limit: "200" });
    if (token) p.set("token", token);
    if (verb) p.set("verb", verb);
    if (target) p.set("target", target);
    if (within > 0) p.set("since", String(Date.now() - within));
    api<AuditReply>(`/audit?${p}`)
      .then((r) => setRows(r.items))
      .catch((e: Error) => setError(e.message));
  }, [token, verb, target, within]);
  const apply = (form: HTMLFormElement) => {
    const f = new FormData(form);
    const p = new URLSearchParams();
    for (const k of ["token", "verb", "target", "within"]) {
      const v = String(f.get(k) ?? "").trim();
      if (v) p.set(k, v);
    }
    location.hash = `#/audit?${p}`;
  };
  return (
    <section>
      <h1>Audit trail</h1>
      <form
        class="row filters"
        aria-label="audit filters"
        onSubmit={(e) => {
          e.preventDefault();
          apply(e.currentTarget);
        }}
      >
        <label>
          Token <input name="token" defaultValue={token} placeholder="any" />
        </label>
        <label>
          Verb{" "}
          <select name="verb" defaultValue={verb}>
            <option value="">any</option>
            <option value="operate">operate</option>
            <option value="admin">admin</option>
          </select>
        </label>
        <label>
          Target <input name="target" defaultValue={target} placeholder="queue" />
        </label>
        <label>
          Within{" "}
          <select name="within" defaultValue={String(within)}>
            {WINDOWS.map(([label, ms]) => (
              <option key={label} value={String(ms)}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <button type="submit">Filter</button>
      </form>
      <ErrorNote error={error} />
      {rows === null ? (
        error ? null : (
          <p class="muted">Loading…</p>
        )
      ) : rows.length === 0 ? (
        <p class="empty muted">No change matches.</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Token</th>
              <th scope="col">Verb</th>
              <th scope="col">Operation</th>
              <th scope="col">Target</th>
              <th scope="col">Outcome</th>
              <th scope="col">Jobs</th>
              <th scope="col">From</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.id} data-audit={r.id} data-operation={r.operation}>
                <td>{time(r.at)}</td>
                <td class="mono">{r.token}</td>
                <td>{r.verb}</td>
                <td>{r.operation}</td>
                <td class="mono">{r.target}</td>
                <td>{r.status ?? "—"}</td>
                <td>{r.jobs ?? "—"}</td>
                <td class="small mono">{r.client ?? "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
