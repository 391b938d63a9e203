// Talking to `conveyor api` from the browser: JSON over fetch with the session cookie (same
// origin), errors as messages, and one shared EventSource for live queue events that comes back
// by itself after a restart, or goes back to sign-in when the session ended.
import { useEffect, useRef } from "preact/hooks";

export class ApiError extends Error {
  status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** GETs started before the first render; the first api() call for the same path takes the answer. */
const early = new Map<string, Promise<unknown>>();

/**
 * Start a GET now, while the app is still rendering: the landing page's data then arrives with
 * the session instead of one round trip (and a render) after it (first paint, bench/firstPaint.ts).
 */
export function prefetch(path: string): void {
  if (early.has(path)) return;
  const p = request(path, {});
  p.catch(() => {}); // never taken (signed out): not an unhandled rejection
  early.set(path, p);
}

export function api<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
  const got = init.method === undefined || init.method === "GET" ? early.get(path) : undefined;
  if (got) {
    early.delete(path);
    return got as Promise<T>;
  }
  return request<T>(path, init);
}

async function request<T>(path: string, init: { method?: string; body?: unknown }): Promise<T> {
  const res = await fetch(path, {
    method: init.method ?? "GET",
    credentials: "same-origin",
    headers: init.body !== undefined ? { "content-type": "application/json" } : {},
    body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
  });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = { error: text };
  }
  if (!res.ok) {
    if (res.status === 401) window.dispatchEvent(new Event("conveyor:signed-out"));
    throw new ApiError(res.status, (body as { error?: string })?.error ?? `HTTP ${res.status}`);
  }
  return body as T;
}

export const q = (s: string) => encodeURIComponent(s);

export interface LiveEvent {
  type: string;
  id: string;
  queue: string;
  at: number;
  progress?: string;
  message?: string;
  [k: string]: unknown;
}

/** Some of a queue's events were missed for good (its stream trimmed them): reload its view. */
export interface GapEvent {
  type: "$gap";
  queue: string;
  reason: "trimmed" | "truncated";
}
type Listener = (e: LiveEvent | GapEvent | { type: "$queues" } | { type: "$status"; open: boolean }) => void;
const listeners = new Set<Listener>();
let source: EventSource | null = null;
/** After the stream closed for good and the session is still valid: wait this long, then reopen. */
const REOPEN_MS = 2_000;

function ensureSource(): void {
  if (source) return;
  const es = (source = new EventSource("/events"));
  const emit: Listener = (e) => {
    for (const l of listeners) l(e);
  };
  es.addEventListener("job", (m) => emit(JSON.parse((m as MessageEvent<string>).data) as LiveEvent));
  es.addEventListener("queues", () => emit({ type: "$queues" }));
  es.addEventListener("gap", (m) => emit({ type: "$gap", ...JSON.parse((m as MessageEvent<string>).data) }));
  es.onopen = () => emit({ type: "$status", open: true });
  es.onerror = () => {
    emit({ type: "$status", open: false });
    // A dropped connection is retried by the browser; a refused one (401, a proxy's error page)
    // closes for good: back to sign-in when the session ended, else a fresh stream shortly.
    if (es.readyState !== EventSource.CLOSED) return;
    source = null;
    const reopen = () =>
      setTimeout(() => {
        if (listeners.size === 0) return;
        ensureSource();
        emit({ type: "$queues" }); // the new stream does not replay what was missed: reload
      }, REOPEN_MS);
    request<{ authRequired: boolean; authenticated: boolean }>("/auth/session", {}).then((s) => {
      if (s.authRequired && !s.authenticated) window.dispatchEvent(new Event("conveyor:signed-out"));
      else reopen();
    }, reopen);
  };
}

/** Follow live events while the component is mounted (one EventSource for the whole page). */
export function useLive(listener: Listener): void {
  const ref = useRef(listener);
  ref.current = listener;
  useEffect(() => {
    const l: Listener = (e) => ref.current(e);
    listeners.add(l);
    ensureSource();
    return () => {
      listeners.delete(l);
    };
  }, []);
}

/** Run `fn` at most once per `ms` (trailing): many events → one refetch. */
export function throttle(fn: () => void, ms: number): () => void {
  let timer: ReturnType<typeof setTimeout> | null = null;
  return () => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = null;
      fn();
    }, ms);
  };
}

/**
 * Whether the session may use controls of this verb: not on a read-only server, and only the
 * verbs its token's scopes name (the API refuses the rest with 403 anyway).
 */
export function may(
  session: { readOnly: boolean; scopes: { verbs: string[] } | null },
  verb: "operate" | "admin",
): boolean {
  return !session.readOnly && (session.scopes === null || session.scopes.verbs.includes(verb));
}
