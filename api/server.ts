// The job API: producers in any language enqueue over HTTP and poll a status URL.
//   POST /queues/{queue}/jobs  → 202 {id, created, status}   (Location: the status URL)
//   GET  /jobs/{id}[?queue=Q]  → state, progress, attempts, result or error; 404 when unknown
//   GET  /queues/{queue}       → backlog counts
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
  type RedisClient,
  type EnqueueOptions,
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

const ENQUEUE_FIELDS = new Set([
  "data",
  "id",
  "idempotencyKey",
  "priority",
  "delayMs",
  "attempts",
  "timeoutMs",
  "contentHash",
]);

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

  function enqueueOptions(body: unknown): { data: unknown } & EnqueueOptions {
    if (typeof body !== "object" || body === null || Array.isArray(body))
      throw new HttpError(400, 'body must be an object like {"data": …, "priority": 0}');
    const b = body as Record<string, unknown>;
    for (const k of Object.keys(b))
      if (!ENQUEUE_FIELDS.has(k))
        throw new HttpError(
          400,
          `unknown field ${JSON.stringify(k)}; allowed: ${[...ENQUEUE_FIELDS].join(", ")}`,
        );
    if (!("data" in b)) throw new HttpError(400, '"data" is required (any JSON value)');
    const str = (k: string) => {
      if (b[k] !== undefined && typeof b[k] !== "string") throw new HttpError(400, `"${k}" must be a string`);
      return b[k] as string | undefined;
    };
    const num = (k: string) => {
      if (b[k] !== undefined && (typeof b[k] !== "number" || !Number.isFinite(b[k])))
        throw new HttpError(400, `"${k}" must be a number`);
      return b[k] as number | undefined;
    };
    return {
      data: b.data,
      id: str("id"),
      idempotencyKey: str("idempotencyKey"),
      contentHash: str("contentHash"),
      priority: num("priority"),
      delayMs: num("delayMs"),
      attempts: num("attempts"),
      timeoutMs: num("timeoutMs"),
    };
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
      return send(200, { queue: parts[1], ...(await admin.counts(parts[1]!)) });
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

  const server = createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      const status =
        err instanceof HttpError
          ? err.status
          : err instanceof InvalidNameError || err instanceof InvalidJobError
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
