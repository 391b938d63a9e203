// `conveyor api`: the job API for producers in any language and the dashboard on one port.
//   the routes and their schemas: api/definitions.ts; handlers: api/routes/*.
//   GET /  and /assets/*: the dashboard (dist/dashboard), public; its data needs credentials.
// Credentials: the bearer token, or the session cookie a browser gets by signing in with it
// (api/auth.ts). Bad input is always a 4xx JSON {error} naming the field, never a 500.
import type { Server } from "node:http";
import { createServer } from "node:http";
import type { Logger } from "pino";
import type pg from "pg";
import {
  DurationError,
  InvalidJobError,
  InvalidNameError,
  PayloadTooLargeError,
  RateLimitError,
  ScheduleError,
  Producer,
  QueueAdmin,
  type RedisClient,
} from "../queue/index.ts";
import { Auth, isLoopback } from "./auth.ts";
import type { ApiContext, PoolSource } from "./context.ts";
import { EventHub } from "./eventHub.ts";
import { HttpError, sendJson } from "./http.ts";
import { QueueDirectory } from "./queueDirectory.ts";
import { JobRecords } from "./records.ts";
import { Router } from "./router.ts";
import { authHandlers } from "./routes/auth.ts";
import { eventHandlers } from "./routes/events.ts";
import { jobHandlers } from "./routes/jobs.ts";
import { poolHandlers } from "./routes/pools.ts";
import { queueHandlers } from "./routes/queues.ts";
import { searchHandlers } from "./routes/search.ts";
import { findDashboardBuild, StaticFiles } from "./static.ts";

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
  /** Start without a token on a non-loopback address (not read-only) anyway. */
  insecureNoAuth?: boolean;
  /** The built dashboard; default: dist/dashboard. null: API only. */
  dashboardDir?: string | null;
  log?: Logger;
}

export class InsecureConfigurationError extends Error {
  override name = "InsecureConfigurationError";
}

export interface JobApi extends Server {
  context: ApiContext;
}

export async function startJobApi(opts: JobApiOptions): Promise<JobApi> {
  const host = opts.host ?? "0.0.0.0";
  if (!opts.token && !opts.readOnly && !isLoopback(host) && !opts.insecureNoAuth)
    throw new InsecureConfigurationError(
      `refusing to serve queue actions without a token on ${host}: set CONVEYOR_API_TOKEN, or --read-only, ` +
        `or listen on 127.0.0.1 (kubectl port-forward), or pass --insecure-no-auth`,
    );
  const admin = new QueueAdmin(opts.redis);
  const auth = new Auth({ token: opts.token, readOnly: opts.readOnly, queues: opts.queues });
  const directory = new QueueDirectory(opts.redis, (q) => auth.queueAllowed(q));
  let records: JobRecords | null = null;
  if (opts.database) records = new JobRecords(opts.database);
  const pools = opts.pools ?? null;
  const ctx: ApiContext = {
    redis: opts.redis,
    admin,
    producer: new Producer(opts.redis),
    auth,
    directory,
    hub: new EventHub(opts.redis, directory),
    records,
    pools,
    log: opts.log,
  };
  const router = new Router({
    ...authHandlers(ctx),
    ...queueHandlers(ctx),
    ...jobHandlers(ctx),
    ...searchHandlers(ctx),
    ...eventHandlers(ctx),
    ...poolHandlers(ctx),
  });
  const files = new StaticFiles(opts.dashboardDir === undefined ? findDashboardBuild() : opts.dashboardDir);
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
      const credential = def.public ? (auth.credential(req) ?? "session") : auth.authenticate(req);
      if (def.method !== "GET") auth.checkMutation(req, credential, def.public);
      const reply = await router.handle(req, res, url, match, maxBody);
      if (reply) sendJson(res, reply.status ?? 200, reply.body, reply.headers);
    };
    handle().catch((err: unknown) => {
      const status =
        err instanceof HttpError
          ? err.status
          : err instanceof InvalidNameError ||
              err instanceof InvalidJobError ||
              err instanceof RateLimitError ||
              err instanceof ScheduleError ||
              err instanceof DurationError
            ? 400
            : err instanceof PayloadTooLargeError
              ? 413
              : 500;
      if (status === 500)
        opts.log?.error({ err: (err as Error).message, path: req.url }, "API request failed");
      if (!res.headersSent)
        sendJson(
          res,
          status,
          { error: status === 500 ? `internal error: ${(err as Error).message}` : (err as Error).message },
          err instanceof HttpError ? err.headers : {},
        );
      else res.destroy();
      req.resume();
    });
  });
  server.on("close", () => {
    void ctx.hub.close();
    void ctx.records?.close();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, host, resolve);
  });
  return Object.assign(server, { context: ctx });
}
