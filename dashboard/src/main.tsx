// The dashboard shell: sign-in, the header (navigation, search, live status) and a hash
// router (#/queues, #/queue/<q>, #/job/<id>, #/flow/<id>, #/search?q=, #/pools,
// #/pool/<ns>/<name>, #/resources), so the server's JSON paths and the UI's never collide.
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, prefetch, useLive, type GapEvent } from "./api.ts";
import type { SessionReply as Session } from "./apiTypes.generated.ts";
import { AuditPage } from "./pages/audit.tsx";
import { FlowPage } from "./pages/flow.tsx";
import { JobPage } from "./pages/job.tsx";
import { PoolPage, PoolsPage } from "./pages/pools.tsx";
import { QueuePage } from "./pages/queue.tsx";
import { QueuesPage } from "./pages/queues.tsx";
import { ResourcesPage } from "./pages/resources.tsx";
import { SearchPage } from "./pages/search.tsx";
import { TenantPage } from "./pages/tenant.tsx";
import "./styles.css";

function useHash(): string {
  const [hash, setHash] = useState(location.hash || "#/");
  useEffect(() => {
    const on = () => setHash(location.hash || "#/");
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return hash;
}

function SignIn({ onDone }: { onDone: () => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(null);
  return (
    <main class="signin">
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setError(null);
          try {
            await api("/auth/session", { method: "POST", body: { token } });
            onDone();
          } catch (err) {
            setError((err as Error).message);
          }
        }}
      >
        <h1>Conveyor</h1>
        <label for="token">API token</label>
        <input
          id="token"
          type="password"
          autocomplete="current-password"
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
          autofocus
          required
        />
        <button type="submit" class="primary">
          Sign in
        </button>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <p class="small muted">
          The token is exchanged for a session cookie; it is not stored in the browser.
        </p>
      </form>
    </main>
  );
}

/** A session whose token sees only some groups: the queue-wide pages would all be refused. */
const groupLimited = (session: Session) => Boolean(session.scopes?.groups);

function Header({ session, hash, onSignOut }: { session: Session; hash: string; onSignOut: () => void }) {
  const search = useRef<HTMLInputElement>(null);
  const [live, setLive] = useState(false);
  const [gap, setGap] = useState<string | null>(null);
  useLive((e) => {
    if (e.type === "$status") setLive((e as { open: boolean }).open);
    else setLive(true);
    if (e.type === "$gap") setGap((e as GapEvent).queue);
  });
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const t = e.target as HTMLElement;
      const typing = t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT");
      if (e.key === "/" && !typing) {
        e.preventDefault();
        search.current?.focus();
        search.current?.select();
      } else if (e.key === "Escape" && t === search.current) search.current?.blur();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
  const current = (p: string) =>
    hash === p || hash.startsWith(p + "/") || hash.startsWith(p + "?") ? "page" : undefined;
  return (
    <header class="top">
      <a class="brand" href="#/">
        Conveyor
      </a>
      <nav aria-label="main">
        {groupLimited(session) ? (
          <a href="#/" aria-current={hash === "#/" || hash === "#/groups" ? "page" : undefined}>
            My groups
          </a>
        ) : (
          <a href="#/" aria-current={hash === "#/" || hash.startsWith("#/queue") ? "page" : undefined}>
            Queues
          </a>
        )}
        {session.pools && !groupLimited(session) && (
          <a href="#/pools" aria-current={current("#/pools") ?? current("#/pool")}>
            Pools
          </a>
        )}
        {!groupLimited(session) && (
          <a href="#/resources" aria-current={current("#/resources")}>
            Resources
          </a>
        )}
        {session.history && (session.scopes === null || session.scopes.verbs.includes("admin")) && (
          <a href="#/audit" aria-current={current("#/audit")}>
            Audit
          </a>
        )}
      </nav>
      <form
        class="search"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          const v = search.current?.value.trim();
          if (v) location.hash = `#/search?q=${encodeURIComponent(v)}`;
        }}
      >
        <input
          ref={search}
          type="search"
          name="q"
          placeholder="Search: job id, idempotency key, or field=value   ( / )"
          aria-label="Search jobs"
          defaultValue={
            hash.startsWith("#/search?") ? (new URLSearchParams(hash.slice(9)).get("q") ?? "") : ""
          }
        />
      </form>
      <span
        class={`live ${live ? "on" : "off"}`}
        title={live ? "live: following the queue event streams" : "reconnecting"}
      >
        {live ? "● live" : "○ offline"}
      </span>
      {gap && (
        <span class="gap small muted" role="status" title="the views were reloaded">
          older events of {gap} were trimmed while away
        </span>
      )}
      {session.readOnly && <span class="badge readonly">read-only</span>}
      {session.authRequired && (
        <button type="button" class="link" onClick={onSignOut}>
          Sign out
        </button>
      )}
    </header>
  );
}

function Route({ hash, session }: { hash: string; session: Session }) {
  const [path, query = ""] = hash.slice(1).split("?");
  const params = new URLSearchParams(query);
  const parts = (path ?? "/").split("/").filter(Boolean).map(decodeURIComponent);
  switch (parts[0]) {
    case undefined:
    case "queues":
      return groupLimited(session) ? <TenantPage /> : <QueuesPage session={session} />;
    case "groups":
      return <TenantPage />;
    case "queue":
      return <QueuePage key={parts[1]} queue={parts[1]!} params={params} session={session} />;
    case "job":
      return <JobPage key={parts[1]} id={parts[1]!} queue={params.get("queue")} session={session} />;
    case "flow":
      return <FlowPage key={parts[1]} id={parts[1]!} />;
    case "search":
      return <SearchPage key={query} q={params.get("q") ?? ""} />;
    case "pools":
      return <PoolsPage />;
    case "pool":
      return <PoolPage namespace={parts[1]!} name={parts[2]!} card={params.get("card")} />;
    case "resources":
      return <ResourcesPage />;
    case "audit":
      return <AuditPage key={query} params={params} />;
    default:
      return (
        <p>
          Nothing here. <a href="#/">Queues</a>
        </p>
      );
  }
}

function App() {
  const hash = useHash();
  const [session, setSession] = useState<Session | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    api<Session>("/auth/session")
      .then(setSession)
      .catch((e: ApiError) => setError(e.message));
  useEffect(() => {
    void load();
    const out = () => setSession((s) => (s ? { ...s, authenticated: false } : s));
    window.addEventListener("conveyor:signed-out", out);
    return () => window.removeEventListener("conveyor:signed-out", out);
  }, []);
  if (error) return <p class="error">{error}</p>;
  if (!session) return <p class="muted pad">Loading…</p>;
  if (session.authRequired && !session.authenticated) return <SignIn onDone={() => location.reload()} />;
  return (
    <>
      <Header
        session={session}
        hash={hash}
        onSignOut={async () => {
          await api("/auth/session", { method: "DELETE" }).catch(() => {});
          location.reload();
        }}
      />
      <main class="page">
        <Route hash={hash} session={session} />
      </main>
    </>
  );
}

// The session and, on the queues page (where most visits start), its list: both requests leave
// together before the first render.
prefetch("/auth/session");
if (/^(#\/?(queues)?)?$/.test(location.hash)) prefetch("/queues");
render(<App />, document.getElementById("app")!);
