// The job API: producers in any language enqueue over HTTP and poll a status URL.
//   POST /queues/{queue}/jobs  → 202 {id, created, status}   (Location: the status URL)
//   GET  /jobs/{id}[?queue=Q]  → state, progress, attempts, result or error; 404 when unknown
//   GET  /queues/{queue}       → backlog counts, paused, rate limit, cancelled, schedules
//   POST /jobs/{id}/cancel[?queue=Q]            → 200 cancelled | 409 already finished | 404
//   POST /queues/{queue}/pause | /resume         → 200 {queue, paused}
//   PUT  /queues/{queue}/rate-limit {"limit": "20/s" | null}, DELETE … → 200 {queue, rateLimit}
//   GET  /queues/{queue}/schedules; PUT|DELETE /queues/{queue}/schedules/{name}
//        PUT body: {"every": "5m"} or {"cron": "0 * * * *", "tz": "Europe/Berlin"}, optional "data", "attempts"
//   GET  /healthz
// Optional bearer token (compared in constant time); request bodies are size-limited.
import { timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Logger } from "pino";
import {
  assertJobId,
  assertQueueName,
  InvalidNameError,
  Producer,
  QueueAdmin,
  PayloadTooLargeError,
  InvalidJobError,
  DurationError,
  RateLimitError,
  ScheduleError,
  formatRateLimit,
  parseDuration,
  parseRateLimit,
  type ScheduleSpec,
  type ScheduleView,
  type RedisClient,
  type JobToEnqueue,
  parseEnvelope,
  EnvelopeError,
} from "../queue/index.ts";

export interface JobApiOptions {
  redis: RedisClient;
  port: number;
  host?: string;
  /** Require `Authorization: Bearer <token>` on every route but /healthz. */
  token?: string;
  maxBodyBytes?: number;
  log?: Logger;
}

class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** A path segment without its %-escapes; a malformed escape is the client's error (400), not ours. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, `malformed %-escape in the path: ${JSON.stringify(segment)}`);
  }
}

/** A JSON body as an object with only `allowed` fields; anything else is a 400 naming the field. */
function fieldsOf(body: unknown, allowed: string[]): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new HttpError(400, `body must be a JSON object with: ${allowed.join(", ")}`);
  for (const k of Object.keys(body))
    if (!allowed.includes(k))
      throw new HttpError(400, `unknown field ${JSON.stringify(k)}; allowed: ${allowed.join(", ")}`);
  return body as Record<string, unknown>;
}

function scheduleJson(s: ScheduleView) {
  return {
    name: s.name,
    every: s.everyMs !== undefined ? `${s.everyMs}ms` : undefined,
    cron: s.cron,
    tz: s.tz,
    data: JSON.parse(s.data) as unknown,
    attempts: s.attempts,
    nextRun: s.nextRun === null ? null : new Date(s.nextRun).toISOString(),
  };
}

export async function startJobApi(opts: JobApiOptions): Promise<Server> {
  const producer = new Producer(opts.redis);
  const admin = new QueueAdmin(opts.redis);
  const maxBody = opts.maxBodyBytes ?? 1024 * 1024;
  const token = opts.token ? Buffer.from(opts.token) : null;

  const authorized = (req: IncomingMessage): boolean => {
    if (!token) return true;
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? "");
    const given = Buffer.from(m?.[1] ?? "");
    return given.length === token.length && timingSafeEqual(given, token);
  };

  async function readJson(req: IncomingMessage): Promise<unknown> {
    if (!(req.headers["content-type"] ?? "").startsWith("application/json"))
      throw new HttpError(415, "send the job as JSON (Content-Type: application/json)");
    const declared = Number(req.headers["content-length"] ?? 0);
    if (declared > maxBody) throw new HttpError(413, `request body is larger than ${maxBody} bytes`);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > maxBody) throw new HttpError(413, `request body is larger than ${maxBody} bytes`);
      chunks.push(chunk as Buffer);
    }
    try {
      return JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch (err) {
      throw new HttpError(400, `request body is not valid JSON: ${(err as Error).message}`);
    }
  }

  function enqueueOptions(body: unknown): JobToEnqueue {
    try {
      return parseEnvelope(body);
    } catch (err) {
      if (err instanceof EnvelopeError)
        throw new HttpError(400, err.message.replace(/^a job must be/, "body must be"));
      throw err;
    }
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://api");
    const parts = url.pathname.split("/").filter(Boolean).map(decodeSegment);
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(body));
    };
    if (url.pathname === "/healthz") return send(200, { ok: true });
    if (!authorized(req))
      return send(401, { error: "missing or wrong bearer token" }, { "www-authenticate": "Bearer" });

    if (parts[0] === "queues" && parts.length === 3 && parts[2] === "jobs") {
      if (req.method !== "POST") throw new HttpError(405, "use POST to enqueue");
      const queue = parts[1]!;
      assertQueueName(queue);
      const { data, ...options } = enqueueOptions(await readJson(req));
      const result = await producer.enqueue(queue, data, options);
      const status = `/jobs/${encodeURIComponent(result.id)}?queue=${encodeURIComponent(queue)}`;
      return send(202, { id: result.id, created: result.created, status }, { location: status });
    }
    if (parts[0] === "queues" && parts.length === 2) {
      if (req.method !== "GET") throw new HttpError(405, "use GET");
      assertQueueName(parts[1]!);
      const [counts, stats] = await Promise.all([admin.counts(parts[1]!), admin.stats(parts[1]!)]);
      const { paused, rateLimit, cancelled, schedules } = stats;
      return send(200, { queue: parts[1], ...counts, paused, rateLimit, cancelled, schedules });
    }
    if (parts[0] === "queues" && parts.length >= 3 && parts[2] !== "jobs") {
      const queue = parts[1]!;
      assertQueueName(queue);
      return queueControl(req, queue, parts.slice(2), send);
    }
    if (parts[0] === "jobs" && parts.length === 3 && parts[2] === "cancel") {
      if (req.method !== "POST") throw new HttpError(405, "use POST to cancel");
      const id = parts[1]!;
      assertJobId(id);
      const queue = url.searchParams.get("queue") ?? undefined;
      if (queue) assertQueueName(queue);
      const r = await admin.cancel(id, queue);
      if (r.outcome === "notFound")
        return send(404, { error: `job ${id} not found (never enqueued, or its record expired)` });
      if (r.outcome === "finished")
        return send(409, { ...r, error: `job ${id} is already ${r.state}: nothing to cancel` });
      return send(200, r);
    }
    if (parts[0] === "jobs" && parts.length === 2) {
      if (req.method !== "GET") throw new HttpError(405, "use GET");
      const id = parts[1]!;
      assertJobId(id);
      const queue = url.searchParams.get("queue") ?? undefined;
      if (queue) assertQueueName(queue);
      const info = await admin.job(id, queue);
      if (!info) return send(404, { error: `job ${id} not found (never enqueued, or its record expired)` });
      const json = (s?: string) => {
        if (s === undefined) return undefined;
        try {
          return JSON.parse(s);
        } catch {
          return s;
        }
      };
      return send(200, {
        id: info.id,
        queue: info.queue,
        state: info.state,
        progress: info.progress ?? null,
        progressMessage: info.progressMessage ?? null,
        attempts: info.attemptsMade,
        maxAttempts: info.attempts,
        result: json(info.result) ?? null,
        error: json(info.error) ?? null,
        deadReason: info.deadReason ?? null,
      });
    }
    throw new HttpError(404, `no route ${req.method} ${url.pathname}`);
  }

  type Send = (status: number, body: unknown) => void;

  /** Pause, resume, rate limit and schedules of one queue (`rest`: the path after the queue). */
  async function queueControl(req: IncomingMessage, queue: string, rest: string[], send: Send) {
    const [what, name] = rest;
    if ((what === "pause" || what === "resume") && rest.length === 1) {
      if (req.method !== "POST") throw new HttpError(405, `use POST to ${what}`);
      await (what === "pause" ? admin.pause(queue) : admin.resume(queue));
      return send(200, { queue, paused: what === "pause" });
    }
    if (what === "rate-limit" && rest.length === 1) {
      if (req.method === "DELETE") {
        await admin.setRateLimit(queue, null);
        return send(200, { queue, rateLimit: null });
      }
      if (req.method !== "PUT")
        throw new HttpError(405, "use PUT to set the rate limit, DELETE to remove it");
      const body = fieldsOf(await readJson(req), ["limit"]);
      if (body.limit === null) {
        await admin.setRateLimit(queue, null);
        return send(200, { queue, rateLimit: null });
      }
      if (typeof body.limit !== "string")
        throw new HttpError(400, '"limit" must be a string like "20/s", or null to remove the limit');
      const limit = parseRateLimit(body.limit);
      await admin.setRateLimit(queue, limit);
      return send(200, { queue, rateLimit: formatRateLimit(limit) });
    }
    if (what === "schedules" && rest.length === 1) {
      if (req.method !== "GET") throw new HttpError(405, "use GET");
      return send(200, { queue, schedules: (await admin.schedules.list(queue)).map(scheduleJson) });
    }
    if (what === "schedules" && rest.length === 2) {
      if (req.method === "DELETE") {
        const removed = await admin.schedules.remove(queue, name!);
        if (!removed) return send(404, { error: `no schedule ${JSON.stringify(name)} on ${queue}` });
        return send(200, { queue, name, removed });
      }
      if (req.method !== "PUT")
        throw new HttpError(405, "use PUT to add or replace a schedule, DELETE to remove it");
      const b = fieldsOf(await readJson(req), ["every", "cron", "tz", "data", "attempts"]);
      for (const k of ["every", "cron", "tz"] as const)
        if (b[k] !== undefined && typeof b[k] !== "string")
          throw new HttpError(400, `"${k}" must be a string`);
      if (b.attempts !== undefined && typeof b.attempts !== "number")
        throw new HttpError(400, '"attempts" must be a number');
      const spec: ScheduleSpec = {
        everyMs: b.every === undefined ? undefined : parseDuration(b.every as string, '"every"'),
        cron: b.cron as string | undefined,
        tz: b.tz as string | undefined,
        data: b.data,
        attempts: b.attempts as number | undefined,
      };
      return send(200, { queue, ...scheduleJson(await admin.schedules.add(queue, name!, spec)) });
    }
    throw new HttpError(404, `no route ${req.method} /queues/${queue}/${rest.join("/")}`);
  }

  const server = createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
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
        opts.log?.error({ err: (err as Error).message, path: req.url }, "job API request failed");
      if (!res.headersSent) {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: (err as Error).message }));
      } else res.destroy();
      req.resume();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host ?? "0.0.0.0", resolve);
  });
  return server;
}
