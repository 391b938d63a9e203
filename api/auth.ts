// Who may do what. API clients send the bearer token; a browser signs in once with it and then
// carries an HttpOnly, SameSite=Strict session cookie. Every state-changing request made with
// a cookie must come from this origin (CSRF), `--read-only` refuses every mutating route, and
// an optional allow-list limits which queues exist for this server.
//
// Sessions are stateless: the cookie is `<expiry ms>.<nonce>.<HMAC>` keyed from the API token, so
// any replica (or a restarted one) accepts it, and rotating the token ends every session.
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { HttpError } from "./http.ts";

export const SESSION_COOKIE = "conveyor_session";
const SESSION_TTL_MS = 12 * 3600_000;
/** Shorter tokens are guessable offline from one session cookie (its HMAC key is the token). */
export const MIN_TOKEN_BYTES = 16;
/** Failed sign-ins one client may make per window before it must wait for the window's end. */
export const SIGN_IN_FAILURES = 5;
export const SIGN_IN_WINDOW_MS = 60_000;
const THROTTLED_CLIENTS = 10_000;

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
  private readonly sessionKey: Buffer | null;
  private readonly allowed: Set<string> | null;
  /** Client address → failed sign-ins in the current window. */
  private readonly failures = new Map<string, { count: number; since: number }>();

  constructor(opts: AuthOptions) {
    this.token = opts.token ? digest(opts.token) : null;
    this.sessionKey = opts.token
      ? createHmac("sha256", opts.token).update("conveyor session cookie v1").digest()
      : null;
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

  /**
   * A sign-in attempt from this client: 429 while it has used up its failures for the window,
   * else whether the token matched (a mismatch counts against the client).
   */
  signIn(req: IncomingMessage, token: string, now = Date.now()): boolean {
    const client = req.socket.remoteAddress ?? "unknown";
    const f = this.failures.get(client);
    const current = f && now - f.since < SIGN_IN_WINDOW_MS ? f : undefined;
    if (current && current.count >= SIGN_IN_FAILURES) {
      const wait = Math.ceil((current.since + SIGN_IN_WINDOW_MS - now) / 1000);
      throw new HttpError(429, `too many failed sign-ins from ${client}: try again in ${wait} s`, {
        "retry-after": String(wait),
      });
    }
    if (this.tokenMatches(token)) {
      this.failures.delete(client);
      return true;
    }
    if (!current && this.failures.size >= THROTTLED_CLIENTS)
      this.failures.delete(this.failures.keys().next().value!);
    this.failures.set(
      client,
      current ? { count: current.count + 1, since: current.since } : { count: 1, since: now },
    );
    return false;
  }

  /** How this request is authenticated, or null when it is not. */
  credential(req: IncomingMessage): Credential | null {
    if (!this.token) return "none-needed";
    const header = req.headers.authorization;
    if (header !== undefined) {
      const m = /^Bearer (.+)$/.exec(header);
      return m && this.tokenMatches(m[1]!) ? "bearer" : null;
    }
    const value = cookie(req, SESSION_COOKIE);
    if (value && this.sessionValid(value)) return "session";
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
      throw new HttpError(
        403,
        "missing Origin header on a state-changing request (CSRF check)",
        {},
        "header.Origin",
      );
    }
    if (!sameOrigin(req, origin))
      throw new HttpError(
        403,
        `Origin ${JSON.stringify(origin)} is not this server (CSRF check)`,
        {},
        "header.Origin",
      );
  }

  queueAllowed(queue: string): boolean {
    return this.allowed === null || this.allowed.has(queue);
  }

  assertQueue(queue: string): void {
    if (!this.queueAllowed(queue)) throw new HttpError(404, `queue ${queue} is not served here (allow-list)`);
  }

  /** A new session; returns the Set-Cookie header value. */
  newSession(req: IncomingMessage, now = Date.now()): string {
    const body = `${now + SESSION_TTL_MS}.${randomBytes(12).toString("base64url")}`;
    return serializeCookie(req, `${body}.${this.sign(body)}`, SESSION_TTL_MS / 1000);
  }

  /** Clears the browser's cookie (a stateless session cannot be revoked alone: rotate the token for that). */
  endSession(req: IncomingMessage): string {
    return serializeCookie(req, "", 0);
  }

  private sign(body: string): string {
    return createHmac("sha256", this.sessionKey!).update(body).digest("base64url");
  }

  private sessionValid(value: string, now = Date.now()): boolean {
    const m = /^(\d{1,15})\.([\w-]{16})\.([\w-]{43})$/.exec(value);
    if (!m || !this.sessionKey || Number(m[1]) <= now) return false;
    const given = Buffer.from(m[3]!, "base64url");
    return timingSafeEqual(given, Buffer.from(this.sign(`${m[1]}.${m[2]}`), "base64url"));
  }
}

const digest = (s: string) => createHash("sha256").update(s).digest();

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
