// Who may do what. API clients send the bearer token; a browser signs in once with it and then
// carries an HttpOnly, SameSite=Strict session cookie. Every state-changing request made with
// a cookie must come from this origin (CSRF), `--read-only` refuses every mutating route, and
// an optional allow-list limits which queues exist for this server.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { HttpError } from "./http.ts";

export const SESSION_COOKIE = "conveyor_session";
const SESSION_TTL_MS = 12 * 3600_000;
const MAX_SESSIONS = 10_000;

export interface AuthOptions {
  token?: string;
  readOnly?: boolean;
  /** Only these queues are visible and actionable (empty: all). */
  queues?: string[];
}

export type Credential = "none-needed" | "bearer" | "session";

export class Auth {
  readonly readOnly: boolean;
  readonly required: boolean;
  private readonly token: Buffer | null;
  private readonly allowed: Set<string> | null;
  /** Session id hash → expiry. In memory: a restart signs browsers out, which is fine. */
  private readonly sessions = new Map<string, number>();

  constructor(opts: AuthOptions) {
    this.token = opts.token ? digest(opts.token) : null;
    this.required = this.token !== null;
    this.readOnly = opts.readOnly ?? false;
    this.allowed = opts.queues && opts.queues.length > 0 ? new Set(opts.queues) : null;
  }

  get allowList(): string[] | null {
    return this.allowed ? [...this.allowed] : null;
  }

  tokenMatches(given: string): boolean {
    // Compare digests: equal length whatever was sent, and constant time.
    return this.token !== null && timingSafeEqual(digest(given), this.token);
  }

  /** How this request is authenticated, or null when it is not. */
  credential(req: IncomingMessage): Credential | null {
    if (!this.token) return "none-needed";
    const header = req.headers.authorization;
    if (header !== undefined) {
      const m = /^Bearer (.+)$/.exec(header);
      return m && this.tokenMatches(m[1]!) ? "bearer" : null;
    }
    const sid = cookie(req, SESSION_COOKIE);
    if (sid && this.sessionValid(sid)) return "session";
    return null;
  }

  authenticate(req: IncomingMessage): Credential {
    const c = this.credential(req);
    if (!c)
      throw new HttpError(401, "missing or wrong bearer token (or sign in again: the session expired)", {
        "www-authenticate": "Bearer",
      });
    return c;
  }

  /**
   * A state-changing request. A browser always sends Origin on a cross-site or same-origin POST/
   * DELETE; one authenticated by cookie must name this host. A bearer token cannot be sent by a
   * forged form, so API clients without an Origin pass; a foreign Origin never does.
   */
  checkMutation(req: IncomingMessage, credential: Credential, publicRoute = false): void {
    if (this.readOnly && !publicRoute) throw new HttpError(403, "this server is read-only (--read-only)");
    const origin = req.headers.origin;
    if (origin === undefined) {
      // No cookie involved (a bearer client, or a server without a token): nothing to forge.
      if (credential === "bearer" || credential === "none-needed") return;
      throw new HttpError(403, "missing Origin header on a state-changing request (CSRF check)");
    }
    if (!sameOrigin(req, origin))
      throw new HttpError(403, `Origin ${JSON.stringify(origin)} is not this server (CSRF check)`);
  }

  queueAllowed(queue: string): boolean {
    return this.allowed === null || this.allowed.has(queue);
  }

  assertQueue(queue: string): void {
    if (!this.queueAllowed(queue)) throw new HttpError(404, `queue ${queue} is not served here (allow-list)`);
  }

  /** A new session; returns the Set-Cookie header value. */
  newSession(req: IncomingMessage): string {
    const now = Date.now();
    for (const [k, exp] of this.sessions) if (exp <= now) this.sessions.delete(k);
    while (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    const sid = randomBytes(32).toString("base64url");
    this.sessions.set(hashId(sid), now + SESSION_TTL_MS);
    return serializeCookie(req, sid, SESSION_TTL_MS / 1000);
  }

  endSession(req: IncomingMessage): string {
    const sid = cookie(req, SESSION_COOKIE);
    if (sid) this.sessions.delete(hashId(sid));
    return serializeCookie(req, "", 0);
  }

  private sessionValid(sid: string): boolean {
    const exp = this.sessions.get(hashId(sid));
    if (exp === undefined) return false;
    if (exp <= Date.now()) {
      this.sessions.delete(hashId(sid));
      return false;
    }
    return true;
  }
}

const digest = (s: string) => createHash("sha256").update(s).digest();
const hashId = (sid: string) => createHash("sha256").update(sid).digest("base64url");

function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

function secure(req: IncomingMessage): boolean {
  return (
    (req.socket as { encrypted?: boolean }).encrypted === true || req.headers["x-forwarded-proto"] === "https"
  );
}

function serializeCookie(req: IncomingMessage, value: string, maxAgeSeconds: number): string {
  return [
    `${SESSION_COOKIE}=${value}`,
    "Path=/",
    "HttpOnly",
    "SameSite=Strict",
    `Max-Age=${maxAgeSeconds}`,
    ...(secure(req) ? ["Secure"] : []),
  ].join("; ");
}

/** Origin equals this server as the browser addressed it (Host, or X-Forwarded-Host behind an Ingress). */
function sameOrigin(req: IncomingMessage, origin: string): boolean {
  let o: URL;
  try {
    o = new URL(origin);
  } catch {
    return false;
  }
  const forwarded = req.headers["x-forwarded-host"];
  const host =
    (typeof forwarded === "string" ? forwarded.split(",")[0]!.trim() : undefined) ?? req.headers.host;
  return host !== undefined && o.host === host;
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;
export function isLoopback(host: string): boolean {
  return LOOPBACK.test(host);
}
