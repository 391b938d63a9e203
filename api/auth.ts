// Who may do what. API clients send the bearer token; a browser signs in once with it and then
// carries an HttpOnly, SameSite=Strict session cookie. Every state-changing request made with
// a cookie must come from this origin (CSRF), `--read-only` refuses every mutating route, and
// an optional allow-list limits which queues exist for this server.
//
// Sessions are stateless: the cookie is `<expiry ms>.<nonce>.<HMAC>` keyed from the API token, so
// any replica (or a restarted one) accepts it, and rotating the token ends every session. A
// named token's session (api/tokens.ts) is `<expiry>.<nonce>.<name b64url>.<HMAC>` keyed from
// that token's stored hash: revoking or re-issuing the token ends its sessions at their next
// request.
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { HttpError } from "./http.ts";
import { FULL_ACCESS, type Principal, type TokenStore } from "./tokens.ts";

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
  /** Named tokens with scopes (--tokens-file). */
  tokens?: TokenStore;
}

export type Credential = "none-needed" | "bearer" | "session";

export class Auth {
  readonly readOnly: boolean;
  readonly required: boolean;
  private readonly token: Buffer | null;
  private readonly sessionKey: Buffer | null;
  private readonly allowed: Set<string> | null;
  readonly tokens: TokenStore | null;
  /** Client address → failed sign-ins in the current window. */
  private readonly failures = new Map<string, { count: number; since: number }>();

  constructor(opts: AuthOptions) {
    this.token = opts.token ? digest(opts.token) : null;
    this.sessionKey = opts.token
      ? createHmac("sha256", opts.token).update("conveyor session cookie v1").digest()
      : null;
    this.tokens = opts.tokens ?? null;
    this.required = this.token !== null || this.tokens !== null;
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

  /** Who this token is: the full-access API token, a named one, or nobody. */
  tokenPrincipal(given: string): Principal | null {
    if (this.tokenMatches(given)) return FULL_ACCESS;
    const e = this.tokens?.find(given);
    return e ? { name: e.name, scope: e.scopes, rate: e.rate ?? null } : null;
  }

  /**
   * A sign-in attempt from this client: 429 while it has used up its failures for the window,
   * else whether the token matched (a mismatch counts against the client).
   */
  signIn(req: IncomingMessage, token: string, now = Date.now()): boolean {
    return this.signInAs(req, token, now) !== null;
  }

  /** signIn, answering who signed in (null: a wrong token). */
  signInAs(req: IncomingMessage, token: string, now = Date.now()): Principal | null {
    const client = req.socket.remoteAddress ?? "unknown";
    const f = this.failures.get(client);
    const current = f && now - f.since < SIGN_IN_WINDOW_MS ? f : undefined;
    if (current && current.count >= SIGN_IN_FAILURES) {
      const wait = Math.ceil((current.since + SIGN_IN_WINDOW_MS - now) / 1000);
      throw new HttpError(429, `too many failed sign-ins from ${client}: try again in ${wait} s`, {
        "retry-after": String(wait),
      });
    }
    const who = this.tokenPrincipal(token);
    if (who) {
      this.failures.delete(client);
      return who;
    }
    if (!current && this.failures.size >= THROTTLED_CLIENTS)
      this.failures.delete(this.failures.keys().next().value!);
    this.failures.set(
      client,
      current ? { count: current.count + 1, since: current.since } : { count: 1, since: now },
    );
    return null;
  }

  /** How this request is authenticated, or null when it is not. */
  credential(req: IncomingMessage): Credential | null {
    return this.identify(req)?.credential ?? null;
  }

  /** How this request is authenticated and who it is, or null when it is not. */
  identify(req: IncomingMessage): { credential: Credential; principal: Principal } | null {
    if (!this.required) return { credential: "none-needed", principal: FULL_ACCESS };
    const header = req.headers.authorization;
    if (header !== undefined) {
      const m = /^Bearer (.+)$/.exec(header);
      const principal = m ? this.tokenPrincipal(m[1]!) : null;
      return principal ? { credential: "bearer", principal } : null;
    }
    const value = cookie(req, SESSION_COOKIE);
    const principal = value ? this.sessionPrincipal(value) : null;
    return principal ? { credential: "session", principal } : null;
  }

  authenticate(req: IncomingMessage): { credential: Credential; principal: Principal } {
    const c = this.identify(req);
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

  /** A new session for this principal (default: the API token); returns the Set-Cookie header value. */
  newSession(req: IncomingMessage, now = Date.now(), who: Principal = FULL_ACCESS): string {
    let body = `${now + SESSION_TTL_MS}.${randomBytes(12).toString("base64url")}`;
    let key = this.sessionKey;
    if (who !== FULL_ACCESS) {
      body += `.${Buffer.from(who.name).toString("base64url")}`;
      key = this.namedKey(who.name);
    }
    return serializeCookie(req, `${body}.${this.sign(body, key!)}`, SESSION_TTL_MS / 1000);
  }

  /** Clears the browser's cookie (a stateless session cannot be revoked alone: rotate the token for that). */
  endSession(req: IncomingMessage): string {
    return serializeCookie(req, "", 0);
  }

  private sign(body: string, key: Buffer): string {
    return createHmac("sha256", key).update(body).digest("base64url");
  }

  /** A named token's session key, from its stored hash: gone with the token (revoked or re-issued). */
  private namedKey(name: string): Buffer | null {
    const e = this.tokens?.byName(name);
    return e ? createHmac("sha256", e.hash).update("conveyor session cookie v1").digest() : null;
  }

  private sessionPrincipal(value: string, now = Date.now()): Principal | null {
    const m = /^(\d{1,15})\.([\w-]{16})(?:\.([\w-]{1,100}))?\.([\w-]{43})$/.exec(value);
    if (!m || Number(m[1]) <= now) return null;
    const name = m[3] === undefined ? null : Buffer.from(m[3], "base64url").toString();
    const key = name === null ? this.sessionKey : this.namedKey(name);
    if (!key) return null;
    const body = m[3] === undefined ? `${m[1]}.${m[2]}` : `${m[1]}.${m[2]}.${m[3]}`;
    const given = Buffer.from(m[4]!, "base64url");
    if (!timingSafeEqual(given, Buffer.from(this.sign(body, key), "base64url"))) return null;
    if (name === null) return FULL_ACCESS;
    const e = this.tokens!.byName(name)!;
    return { name: e.name, scope: e.scopes, rate: e.rate ?? null };
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
