// `conveyor api`: the job API for producers in any language and the dashboard on one port.
//   the routes and their schemas: api/definitions.ts; handlers: api/routes/*.
//   GET /  and /assets/*: the dashboard (dist/dashboard), public; its data needs credentials.
//   Not built (a clone without `npm run build`): a warning at start, and `/` a page saying so.
// Credentials: the bearer token, or the session cookie a browser gets by signing in with it
// (api/auth.ts). Bad input is always a 4xx JSON {error} naming the field, never a 500.
import type { Server } from "node:http";
import { createServer } from "node:http";
import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type pg from "pg";
import {
  ContractError,
  ContractViolationError,
  DurationError,
  InvalidJobError,
  InvalidNameError,
  LayoutRefusedError,
  PayloadTooLargeError,
  RateLimitError,
  ScheduleError,
  Producer,
  QueueAdmin,
  ReaderReport,
  type DurabilityOptions,
  type RedisClient,
} from "../queue/index.ts";
import { authorize } from "./access.ts";
import { auditParams, PgAudit, StdoutAudit, type AuditLog } from "./audit.ts";
import { AuditDrain } from "./auditDrain.ts";
import { checkTokenRate } from "./tokenRate.ts";
import { ROUTES } from "./definitions.ts";
import { Auth, isLoopback, MIN_TOKEN_BYTES } from "./auth.ts";
import type { ApiContext, PoolSource } from "./context.ts";
import { EventHub } from "./eventHub.ts";
import { contractRefusal, HttpError, sendJson } from "./http.ts";
import { QueueDirectory } from "./queueDirectory.ts";
import { ApiMetrics } from "./metrics.ts";
import { JobRecords } from "./records.ts";
import { RecordsSwitch } from "./recordsSwitch.ts";
import { Router, type Handlers, type QueueGuard } from "./router.ts";
import { authHandlers } from "./routes/auth.ts";
import { eventHandlers } from "./routes/events.ts";
import { flowHandlers } from "./routes/flows.ts";
import { jobApiHandlers } from "./routes/jobApi.ts";
import { contractHandlers } from "./routes/contracts.ts";
import { jobHandlers } from "./routes/jobs.ts";
import { poolHandlers } from "./routes/pools.ts";
import { groupHandlers } from "./routes/groups.ts";
import { resourceHandlers } from "./routes/resources.ts";
import { layoutHandlers } from "./routes/layout.ts";
import { ResourceHistory } from "./resourceHistory.ts";
import { RolloutHistory } from "./rolloutHistory.ts";
import { queueHandlers } from "./routes/queues.ts";
import { searchHandlers } from "./routes/search.ts";
import { findDashboardBuild, NOT_BUILT_HINT, StaticFiles } from "./static.ts";
import { FULL_ACCESS, TokenStore } from "./tokens.ts";

export interface JobApiOptions {
  redis: RedisClient;
  port: number;
  host?: string;
  /** Require `Authorization: Bearer <token>` (or a session signed in with it) on every data route. */
  token?: string;
  maxBodyBytes?: number;
  /** Every mutating route answers 403; the dashboard hides its actions. */
  readOnly?: boolean;
  /** Serve only these queues (empty: all). */
  queues?: string[];
  /** Job records for history and search (a pool of the API's own; the workers' recorders migrate). */
  database?: pg.Pool;
  /** WorkerPools for the Pools page (hidden without). */
  pools?: PoolSource | null;
  /** Named tokens with scopes, read from this YAML file and again whenever it changes (api/tokens.ts). */
  tokensFile?: string;
  /** Audit rows older than this are deleted (ms; default 90 days). */
  auditRetentionMs?: number;
  /** Start without a token on a non-loopback address (not read-only) anyway. */
  insecureNoAuth?: boolean;
  /** The built dashboard; default: dist/dashboard. null: API only. A directory without a build: `/` says so. */
  dashboardDir?: string | null;
  /** Enqueues acknowledged once a replica has them ("replicated"): 503 when none confirmed. */
  durability?: DurabilityOptions;
  /** How often the resources' utilization is sampled for the last-hour chart (ms; 0 = never; default 30 s). */
  resourceSampleMs?: number;
  /** How often the pools' rollouts in progress are sampled for the pool page's chart (0: never). */
  rolloutSampleMs?: number;
  log?: Logger;
}

/** The queue library's input errors are the client's mistake: 4xx in the one error shape. */
function asHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  const message = (err as Error)?.message ?? String(err);
  if (err instanceof PayloadTooLargeError)
    return new HttpError(413, message, {}, "body.data", "payload_too_large");
  if (err instanceof RateLimitError) return HttpError.field(400, "body.limit", message, "invalid_field");
  if (err instanceof ScheduleError || err instanceof DurationError)
    return HttpError.field(400, scheduleField(message), message, "invalid_field");
  if (err instanceof ContractViolationError) return contractRefusal(err);
  if (err instanceof ContractError) return HttpError.field(400, "body", message, "invalid_contract");
  if (err instanceof InvalidNameError || err instanceof InvalidJobError)
    return new HttpError(400, message, {}, null, "invalid_request");
  // (this server must be upgraded: the pipeline's layout in force is newer than it writes)
  if (err instanceof LayoutRefusedError) return new HttpError(409, message, {}, null, "layout_refused");
  return new HttpError(500, `internal error: ${message}`);
}

/** Which schedule input a ScheduleError is about, from its message (the store names the rule). */
function scheduleField(message: string): string {
  if (/schedule name/.test(message)) return "path.schedule";
  if (/time zone|^tz /.test(message)) return "body.tz";
  if (/cron/.test(message) && !/every/.test(message)) return "body.cron";
  if (/every/.test(message)) return "body.every";
  if (/attempts/.test(message)) return "body.attempts";
  if (/data/.test(message)) return "body.data";
  return "body";
}

/** How long start-up waits for Redis to switch records on for the served pipelines. */
const RECORDS_START_WAIT_MS = 5_000;

/**
 * Records on for the pipelines the API serves (`--queues`), so their first jobs are recorded
 * whoever enqueues them. Redis away or refusing: start anyway; the API's own enqueues try again.
 */
async function switchRecordsOn(sw: RecordsSwitch, queues: string[], log?: Logger): Promise<void> {
  const all = Promise.all(queues.map((q) => sw.ensure(q))).then(() => true);
  if (!(await Promise.race([all, sleep(RECORDS_START_WAIT_MS, false, { ref: false })])))
    log?.warn("job records: Redis did not answer; the served pipelines are switched on when it does");
}

/** Every state change (verb operate or admin) is written to the audit trail around its handler. */
function audited(ctx: ApiContext, handlers: Handlers): Handlers {
  const out: Handlers = {};
  for (const def of ROUTES) {
    const h = handlers[def.name]!;
    const verb = def.access?.verb;
    if (def.method === "GET" || (verb !== "operate" && verb !== "admin")) {
      out[def.name] = h;
      continue;
    }
    out[def.name] = async (rc) => {
      const { params, query, body } = rc;
      const target =
        [
          params.queue ?? (query.queue as string | undefined),
          ...(params.group !== undefined ? [`group:${params.group}`] : []),
          ...(params.id !== undefined ? [`job:${params.id}`] : []),
          ...(params.schedule !== undefined ? [`schedule:${params.schedule}`] : []),
        ]
          .filter(Boolean)
          .join(" ") || def.path;
      const finish = await ctx.audit.begin({
        token: rc.principal.name,
        verb: verb,
        operation: def.name,
        target,
        params: auditParams({ path: params, query, body }),
        client: rc.req.socket.remoteAddress ?? null,
      });
      const done = (status: number, result: unknown) =>
        finish(status, result).catch((err: Error) =>
          ctx.log?.error({ err: err.message, operation: def.name }, "audit: the outcome was not written"),
        );
      try {
        const reply = await h(rc);
        await done(reply?.status ?? 200, reply?.body);
        return reply;
      } catch (err) {
        const e = asHttpError(err);
        await done(e.status, e.body);
        throw err;
      }
    };
  }
  return { ...handlers, ...out };
}

export class InsecureConfigurationError extends Error {
  override name = "InsecureConfigurationError";
}

export interface JobApi extends Server {
  context: ApiContext;
}

export async function startJobApi(opts: JobApiOptions): Promise<JobApi> {
  const host = opts.host ?? "0.0.0.0";
  if (!opts.token && !opts.tokensFile && !opts.readOnly && !isLoopback(host) && !opts.insecureNoAuth)
    throw new InsecureConfigurationError(
      `refusing to serve queue actions without a token on ${host}: set CONVEYOR_API_TOKEN, or --read-only, ` +
        `or listen on 127.0.0.1 (kubectl port-forward), or pass --insecure-no-auth`,
    );
  if (opts.token !== undefined && Buffer.byteLength(opts.token) < MIN_TOKEN_BYTES)
    throw new InsecureConfigurationError(
      `CONVEYOR_API_TOKEN is ${Buffer.byteLength(opts.token)} bytes; use at least ${MIN_TOKEN_BYTES} ` +
        `(e.g. openssl rand -hex 32): it also keys the dashboard's session cookies`,
    );
  const admin = new QueueAdmin(opts.redis);
  const tokens = opts.tokensFile
    ? new TokenStore(
        opts.tokensFile,
        (message) => opts.log?.error({ file: opts.tokensFile }, message),
        (names) => opts.log?.info({ file: opts.tokensFile, tokens: names }, "API tokens loaded"),
      ).start()
    : undefined;
  if (tokens && tokens.names.length === 0)
    opts.log?.warn(
      { file: opts.tokensFile },
      "the tokens file is absent or has no tokens: only CONVEYOR_API_TOKEN is accepted until it has some",
    );
  const auth = new Auth({ token: opts.token, readOnly: opts.readOnly, queues: opts.queues, tokens });
  const metrics = new ApiMetrics(opts.log);
  const directory = new QueueDirectory(opts.redis, (q) => auth.queueAllowed(q), metrics);
  let records: JobRecords | null = null;
  if (opts.database) records = new JobRecords(opts.database);
  const recordsSwitch = opts.database ? new RecordsSwitch(opts.redis, opts.log) : null;
  /** The allow-list for every route that names a queue or a job (api/router.ts). */
  const guard: QueueGuard = async (queue, jobId) => {
    if (auth.allowList === null) return;
    if (queue !== undefined) return auth.assertQueue(queue);
    if (jobId === undefined) return;
    const live = (await admin.job(jobId))?.queue;
    const queues = live ? [live] : ((await records?.byId(jobId)) ?? []).map((r) => r.queue);
    if (queues.length > 0 && !queues.some((q) => auth.queueAllowed(q)))
      throw new HttpError(404, `job ${jobId} not found (never enqueued, or its record expired)`);
  };
  const pools = opts.pools ?? null;
  const audit: AuditLog = opts.database ? new PgAudit(opts.database) : new StdoutAudit();
  if (!opts.database)
    opts.log?.warn(
      "audit trail: no PostgreSQL (--database), so state changes are written as JSON lines on stdout only",
    );
  const ctx: ApiContext = {
    redis: opts.redis,
    admin,
    producer: new Producer(opts.redis, opts.durability),
    auth,
    directory,
    hub: new EventHub(opts.redis, directory, metrics),
    metrics,
    records,
    recordsSwitch,
    pools,
    resourceHistory:
      opts.resourceSampleMs === 0
        ? null
        : new ResourceHistory(opts.redis, opts.resourceSampleMs ?? 30_000, opts.log, (err) =>
            metrics.error("resource_history", err),
          ),
    rolloutHistory:
      opts.rolloutSampleMs === 0 || !pools
        ? null
        : new RolloutHistory(opts.redis, pools, opts.rolloutSampleMs ?? 10_000, opts.log, (err) =>
            metrics.error("rollout_history", err),
          ),
    audit,
    log: opts.log,
  };
  const router = new Router(
    audited(ctx, {
      ...authHandlers(ctx),
      ...queueHandlers(ctx),
      ...groupHandlers(ctx),
      ...jobHandlers(ctx),
      ...jobApiHandlers(ctx),
      ...contractHandlers(ctx),
      ...searchHandlers(ctx),
      ...flowHandlers(ctx),
      ...eventHandlers(ctx),
      ...poolHandlers(ctx),
      ...resourceHandlers(ctx),
      ...layoutHandlers(ctx),
    }),
    undefined,
    guard,
    (rc) => authorize(ctx, rc),
  );
  const files = new StaticFiles(
    opts.dashboardDir === undefined ? findDashboardBuild() : opts.dashboardDir,
    opts.dashboardDir !== null,
  );
  if (files.notBuilt)
    opts.log?.warn(
      { dashboard: opts.dashboardDir ?? "dist/dashboard" },
      `the dashboard is not built: GET / answers a page saying so; to serve it, ${NOT_BUILT_HINT} and restart`,
    );
  const maxBody = opts.maxBodyBytes ?? 1024 * 1024;

  const server = createServer((req, res) => {
    const handle = async () => {
      let url: URL;
      try {
        url = new URL(req.url ?? "/", "http://api");
      } catch {
        throw new HttpError(400, "malformed request URL");
      }
      const method = req.method ?? "GET";
      if ((method === "GET" || method === "HEAD") && files.serve(req, res, url.pathname)) return;
      const match = router.match(method, url.pathname);
      const def = match.route.def;
      const who = def.public ? auth.identify(req) : auth.authenticate(req);
      const credential = who?.credential ?? "session";
      if (def.method !== "GET") auth.checkMutation(req, credential, def.public);
      if (who?.principal.rate) await checkTokenRate(opts.redis, who.principal);
      const reply = await router.handle(req, res, url, match, maxBody, who?.principal ?? FULL_ACCESS);
      if (reply) sendJson(res, reply.status ?? 200, reply.body, reply.headers);
    };
    handle().catch((err: unknown) => {
      const e = asHttpError(err);
      if (e.status >= 500 && !(err instanceof HttpError)) metrics.error("request", err, { path: req.url });
      if (!res.headersSent) sendJson(res, e.status, e.body, e.headers);
      else res.destroy();
      req.resume();
    });
  });
  ctx.resourceHistory?.start();
  ctx.rolloutHistory?.start();
  const retention = opts.auditRetentionMs ?? 90 * 24 * 3600_000;
  const expire = () =>
    audit
      .expire(retention)
      .catch((err: Error) => opts.log?.warn({ err: err.message }, "audit: old rows not deleted"));
  void expire();
  const expiry = setInterval(expire, 3600_000).unref();
  // The CLI's and the operator's changes (queue/audit.ts) join the trail here.
  const drain = opts.database
    ? new AuditDrain({
        redis: opts.redis,
        db: opts.database,
        pipelines: async () => [...new Set((await directory.list()).map((q) => q.split("/")[0]!))],
        consumer: `api:${hostname()}:${process.pid}`,
        onError: (err) => metrics.error("audit_drain", err),
      })
    : null;
  drain?.start();
  // (counted as a reader of the layouts: `conveyor layout status`, finalize)
  const reader = new ReaderReport(opts.redis, `api:${hostname()}:${process.pid}`, "api", 15_000, (err) =>
    metrics.error("layout_report", err),
  );
  reader.start();
  server.on("close", () => {
    void reader.stop();
    void ctx.resourceHistory?.stop();
    void ctx.rolloutHistory?.stop();
    tokens?.stop();
    clearInterval(expiry);
    void drain?.stop();
    void ctx.hub.close();
    void ctx.records?.close();
  });
  if (recordsSwitch && opts.queues?.length) await switchRecordsOn(recordsSwitch, opts.queues, opts.log);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, host, resolve);
  });
  return Object.assign(server, { context: ctx });
}
