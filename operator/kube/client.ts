// A thin Kubernetes REST client over a kubeconfig (./kubeConfig.ts: authentication, TLS) and
// node:https, without @kubernetes/client-node at run time (its import alone is ~83 MiB RSS).
// Why not the generated API classes: every PATCH here must carry an explicit
// Content-Type (client-node defaults to JSON Patch), objects must pass through untouched (the
// generated serializer turns times into Dates and drops unknown fields, which would make a
// desired-vs-observed comparison lie), and every call is counted by verb for the zero-writes
// guarantee. Writes go through a gate: only the leader writes.
import * as https from "node:https";
import * as http from "node:http";
import { createInterface } from "node:readline";
import type { OperatorMetrics } from "../metrics.ts";
import {
  ApiException,
  NotLeaderError,
  isNotFound,
  PatchStrategy,
  resourceOf,
  type KubeList,
  type WatchEvent,
} from "./api.ts";
import type { KubeCredentials } from "./kubeConfig.ts";

export const FIELD_MANAGER = "conveyor-operator";

export type Verb = "get" | "list" | "watch" | "create" | "update" | "patch" | "delete";
const WRITE_VERBS: ReadonlySet<Verb> = new Set(["create", "update", "patch", "delete"]);

// The API's shapes and errors, for the modules that import them with the client.
export * from "./api.ts";

export interface KubeClientOptions {
  metrics?: OperatorMetrics;
  /** Writes (create/update/patch/delete) are refused when this returns false. */
  canWrite?: () => boolean;
  /**
   * Aborts when the right to write ends (leadership lost): a write in flight is cut off then
   * (NotLeaderError) rather than landing after a standby took over.
   */
  writeSignal?: () => AbortSignal | undefined;
  userAgent?: string;
  /** Per-request timeout for everything but watches. */
  timeoutMs?: number;
}

interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  /** Count the call under this resource label (default: from the path). */
  resource?: string;
}

export class KubeClient {
  readonly kc: KubeCredentials;
  private readonly opts: KubeClientOptions;
  private agent: https.Agent | http.Agent | undefined;
  /** What the agent's TLS options were made from (ca, cert, key, rejectUnauthorized, servername). */
  private agentTls: string[] = [];
  private readonly server: string;

  constructor(kc: KubeCredentials, opts: KubeClientOptions = {}) {
    this.kc = kc;
    this.opts = opts;
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error("kubeconfig has no current cluster");
    this.server = cluster.server.replace(/\/+$/, "");
  }

  /**
   * A client sharing this one's connection with other options: another write gate (none, for
   * the leader lease; leadership, for the controllers) or timeout.
   */
  with(opts: Pick<KubeClientOptions, "canWrite" | "writeSignal" | "timeoutMs">): KubeClient {
    const c = new KubeClient(this.kc, { ...this.opts, ...opts });
    c.agent = this.agent;
    c.agentTls = this.agentTls;
    return c;
  }

  private async requestOptions(
    method: string,
    extraHeaders: Record<string, string>,
  ): Promise<https.RequestOptions> {
    const opts: https.RequestOptions = { method, headers: {} };
    await this.kc.applyToHTTPSOptions(opts);
    // A new agent when the TLS material changes: an exec plugin may rotate the client certificate.
    // Compared by content (client-node may hand out a new Buffer per call); the old agent's
    // connections, watches among them, run out on their own.
    const tlsId = [opts.ca, opts.cert, opts.key, opts.rejectUnauthorized, opts.servername].map(String);
    if (!this.agent || tlsId.some((v, i) => v !== this.agentTls[i])) {
      this.agentTls = tlsId;
      // No socket limit: every informer's watch holds a connection for minutes, and a capped
      // pool full of watches would stall every other request behind them.
      const pool = { keepAlive: true, maxSockets: Infinity, maxFreeSockets: 16 };
      this.agent = this.server.startsWith("http:")
        ? new http.Agent(pool)
        : new https.Agent({
            ca: opts.ca,
            cert: opts.cert,
            key: opts.key,
            rejectUnauthorized: opts.rejectUnauthorized,
            servername: opts.servername,
            ...pool,
          });
    }
    opts.agent = this.agent;
    opts.headers = {
      ...(opts.headers as Record<string, string>),
      Accept: "application/json",
      "User-Agent": this.opts.userAgent ?? "conveyor-operator",
      ...extraHeaders,
    };
    return opts;
  }

  private url(path: string, query?: Record<string, string | number | boolean | undefined>): URL {
    const u = new URL(this.server + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u;
  }

  private count(verb: Verb, resource: string, code: number | string): void {
    this.opts.metrics?.apiRequests.inc({ verb, resource, code: String(code) });
  }

  async request<T>(verb: Verb, method: string, path: string, ro: RequestOptions = {}): Promise<T> {
    const resource = ro.resource ?? resourceOf(path);
    const isWrite = WRITE_VERBS.has(verb);
    const writeSignal = isWrite ? this.opts.writeSignal?.() : undefined;
    const refuseUnlessLeader = () => {
      if (isWrite && ((this.opts.canWrite && !this.opts.canWrite()) || writeSignal?.aborted))
        throw new NotLeaderError(`not the leader: refusing ${verb} ${path}`);
    };
    refuseUnlessLeader();
    // client-node defaults PATCH to JSON Patch; here every PATCH names its patch type.
    if (method === "PATCH" && !ro.contentType)
      throw new Error(`PATCH ${path} without an explicit Content-Type`);
    const payload =
      ro.body === undefined ? undefined : typeof ro.body === "string" ? ro.body : JSON.stringify(ro.body);
    const headers: Record<string, string> = {};
    if (payload !== undefined) {
      headers["Content-Type"] = ro.contentType ?? "application/json";
      headers["Content-Length"] = String(Buffer.byteLength(payload));
    }
    const opts = await this.requestOptions(method, headers);
    // Leadership may have ended while the credentials were read (an exec plugin can take seconds):
    // the abort listener below would never fire for a signal already aborted.
    refuseUnlessLeader();
    const url = this.url(path, ro.query);
    const isHttp = url.protocol === "http:";
    let status: number | "error" = "error";
    try {
      const { code, body, resHeaders } = await new Promise<{
        code: number;
        body: string;
        resHeaders: Record<string, string>;
      }>((resolve, reject) => {
        const req = (isHttp ? http : https).request(url, opts, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () =>
            resolve({
              code: res.statusCode ?? 0,
              body: Buffer.concat(chunks).toString("utf8"),
              resHeaders: Object.fromEntries(
                Object.entries(res.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : (v ?? "")]),
              ),
            }),
          );
          res.on("error", reject);
        });
        req.setTimeout(this.opts.timeoutMs ?? 30_000, () =>
          req.destroy(new Error(`timeout after ${this.opts.timeoutMs ?? 30_000}ms: ${method} ${path}`)),
        );
        const onLeadershipLost = () =>
          req.destroy(new NotLeaderError(`leadership lost: ${verb} ${path} cut off in flight`));
        writeSignal?.addEventListener("abort", onLeadershipLost, { once: true });
        req.on("close", () => writeSignal?.removeEventListener("abort", onLeadershipLost));
        req.on("error", reject);
        if (payload !== undefined) req.write(payload);
        req.end();
      });
      status = code;
      if (code < 200 || code >= 300) {
        let message = `${method} ${path}: HTTP ${code}`;
        try {
          const s = JSON.parse(body) as { message?: string };
          if (s.message) message = `${method} ${path}: ${s.message}`;
        } catch {
          // not a Status
        }
        throw new ApiException(code, message, body, resHeaders);
      }
      return (body ? JSON.parse(body) : {}) as T;
    } finally {
      this.count(verb, resource, status);
    }
  }

  /** GET; null on 404. */
  async get<T>(path: string): Promise<T | null> {
    try {
      return await this.request<T>("get", "GET", path);
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  /**
   * A list whose items carry their apiVersion and kind, as watch events and GETs do. The API server
   * leaves them off list items; a cache filled by a list would otherwise differ from what the
   * operator applies on those two fields forever (a no-op apply changes nothing, so no watch event
   * ever repairs the cached copy) and every reconcile would write.
   */
  async list<T>(
    path: string,
    query: {
      labelSelector?: string;
      fieldSelector?: string;
      limit?: number;
      continue?: string;
      resourceVersion?: string;
    } = {},
  ): Promise<KubeList<T>> {
    const list = await this.request<KubeList<T> & { apiVersion?: string; kind?: string }>(
      "list",
      "GET",
      path,
      { query },
    );
    const kind = list.kind?.replace(/List$/, "");
    if (kind && list.apiVersion) {
      for (const item of list.items as { apiVersion?: string; kind?: string }[]) {
        item.apiVersion ??= list.apiVersion;
        item.kind ??= kind;
      }
    }
    return list;
  }

  /** Every page of a list. */
  async listAll<T>(
    path: string,
    query: { labelSelector?: string; fieldSelector?: string } = {},
  ): Promise<KubeList<T>> {
    const items: T[] = [];
    let cont: string | undefined;
    let rv: string | undefined;
    do {
      const page = await this.list<T>(path, { ...query, limit: 500, continue: cont });
      items.push(...page.items);
      cont = page.metadata.continue || undefined;
      rv = page.metadata.resourceVersion;
    } while (cont);
    return { metadata: { resourceVersion: rv }, items };
  }

  create<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>("create", "POST", path, { body, query: { fieldManager: FIELD_MANAGER } });
  }

  /** Server-side apply (field manager conveyor-operator; force: a controller owns its fields). */
  apply<T>(path: string, body: unknown, opts: { force?: boolean; fieldManager?: string } = {}): Promise<T> {
    return this.request<T>("patch", "PATCH", path, {
      body,
      contentType: PatchStrategy.ServerSideApply,
      query: { fieldManager: opts.fieldManager ?? FIELD_MANAGER, force: opts.force ?? true },
    });
  }

  /** JSON merge patch (RFC 7386). */
  mergePatch<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>("patch", "PATCH", path, {
      body,
      contentType: PatchStrategy.MergePatch,
      query: { fieldManager: FIELD_MANAGER },
    });
  }

  update<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>("update", "PUT", path, { body, query: { fieldManager: FIELD_MANAGER } });
  }

  /** DELETE; false when it was already gone. */
  async delete(
    path: string,
    opts: { propagationPolicy?: "Foreground" | "Background" | "Orphan"; preconditionsUid?: string } = {},
  ): Promise<boolean> {
    const body: Record<string, unknown> = { apiVersion: "v1", kind: "DeleteOptions" };
    if (opts.propagationPolicy) body.propagationPolicy = opts.propagationPolicy;
    if (opts.preconditionsUid) body.preconditions = { uid: opts.preconditionsUid };
    try {
      await this.request("delete", "DELETE", path, { body });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  /**
   * One watch request: resolves when the server ends the stream (timeoutSeconds) or `signal`
   * aborts; rejects on a transport error or an HTTP error status. ERROR events are passed on.
   */
  async watch<T>(
    path: string,
    query: {
      resourceVersion?: string;
      labelSelector?: string;
      fieldSelector?: string;
      timeoutSeconds?: number;
    },
    onEvent: (e: WatchEvent<T>) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const opts = await this.requestOptions("GET", {});
    const url = this.url(path, { ...query, watch: true, allowWatchBookmarks: true });
    const resource = resourceOf(path);
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      const done = (err?: unknown) => {
        if (settled) return;
        settled = true;
        signal.removeEventListener("abort", onAbort);
        if (err && !signal.aborted) reject(err);
        else resolve();
      };
      let responded = false;
      const req = (url.protocol === "http:" ? http : https).request(url, opts, (res) => {
        responded = true;
        this.count("watch", resource, res.statusCode ?? 0);
        if (res.statusCode !== 200) {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const body = Buffer.concat(chunks).toString("utf8");
            done(new ApiException(res.statusCode ?? 0, `watch ${path}: HTTP ${res.statusCode}`, body, {}));
          });
          res.on("error", done);
          return;
        }
        // An idle watch still gets bookmarks about every minute; a silent connection for longer
        // than this is dead (a half-open TCP connection after a network partition).
        res.setTimeout(((query.timeoutSeconds ?? 300) + 90) * 1000, () =>
          req.destroy(new Error(`watch ${path}: no data, connection presumed dead`)),
        );
        const lines = createInterface({ input: res, crlfDelay: Infinity });
        // readline re-emits the response's errors (a reset connection): without a listener
        // that would be an uncaught exception.
        lines.on("error", done);
        lines.on("line", (line) => {
          if (!line.trim()) return;
          let ev: WatchEvent<T>;
          try {
            ev = JSON.parse(line) as WatchEvent<T>;
          } catch {
            return;
          }
          try {
            onEvent(ev);
          } catch (err) {
            // the handler refused the stream (e.g. 410 Gone): end it with that error
            done(err);
            req.destroy();
          }
        });
        res.on("end", () => done());
        res.on("error", done);
        res.on("close", () => done());
      });
      const onAbort = () => req.destroy();
      signal.addEventListener("abort", onAbort, { once: true });
      req.on("error", (err) => {
        if (!responded) this.count("watch", resource, "error");
        done(err);
      });
      req.end();
    });
  }
}
