// Search results: by job id, idempotency key, or field=value on payload/result. A single hit
// opens the job straight away.
import { useEffect, useState } from "preact/hooks";
import { api, q } from "../api.ts";
import type { SearchHit, SearchReply } from "../apiTypes.generated.ts";
import { ago, ErrorNote, StateBadge } from "../ui.tsx";

export function SearchPage({ q: query }: { q: string }) {
  const [hits, setHits] = useState<SearchHit[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = (cursor?: string) => {
    const p = new URLSearchParams({ q: query, limit: "50" });
    if (cursor) p.set("cursor", cursor);
    return api<SearchReply>(`/search?${p}`)
      .then((r) => {
        setHits((h) => (cursor ? [...(h ?? []), ...r.items] : r.items));
        setNext(r.next);
      })
      .catch((e: Error) => setError(e.message));
  };
  useEffect(() => {
    if (query) void load();
  }, []);
  return (
    <section data-q={query}>
      <h1>Search</h1>
      <p class="small muted">
        A job id, an idempotency key, or <code>field=value</code> on the payload or result (
        <code>data:customer.id=42</code>, <code>result:status="ok"</code>).
      </p>
      <ErrorNote error={error} />
      {/^flow:\S+$/.test(query) && (
        <p data-flow-link>
          <a href={`#/flow/${q(query.slice(5))}`}>The flow's graph</a>
        </p>
      )}
      {!query ? null : hits === null ? (
        error ? null : (
          <p class="muted">Searching…</p>
        )
      ) : hits.length === 0 ? (
        <p class="empty muted">No job matches {JSON.stringify(query)}.</p>
      ) : (
        <>
          <table class="grid">
            <thead>
              <tr>
                <th scope="col">Job</th>
                <th scope="col">Queue</th>
                <th scope="col">State</th>
                <th scope="col">Matched</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {hits.map((h) => (
                <tr key={h.queue + h.id} data-job={h.id}>
                  <th scope="row">
                    <a class="mono" href={`#/job/${q(h.id)}?queue=${q(h.queue)}`}>
                      {h.id}
                    </a>
                  </th>
                  <td>
                    <a href={`#/queue/${q(h.queue)}`}>{h.queue}</a>
                  </td>
                  <td>
                    <StateBadge state={h.state === "queued" ? "ready" : h.state} />
                  </td>
                  <td class="small">{h.matched}</td>
                  <td>{ago(h.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {next && (
            <button type="button" onClick={() => void load(next)}>
              More
            </button>
          )}
        </>
      )}
    </section>
  );
}
