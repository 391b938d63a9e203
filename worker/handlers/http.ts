// `http://` handlers: POST the job data to a sidecar (any language) on localhost. The job's
// identity travels in headers so the body is exactly the job data.
import { activeTraceHeaders } from "../../queue/tracing.ts";
import {
  dependencyFailure,
  foreignError,
  HandlerError,
  parseRetryAfter,
  RateLimitedError,
  type Handler,
  type HandlerContext,
  type JobView,
} from "./types.ts";

export const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

const tooLarge = () =>
  new HandlerError(`handler sidecar response is larger than ${MAX_RESPONSE_BYTES} bytes`, {
    retryable: false,
  });

/**
 * The response body as text, read chunk by chunk and counted in bytes: past `cap` the request
 * is aborted (the connection closed), so a huge or endless response cannot exhaust memory.
 */
async function readCapped(res: Response, cap: number, signal: AbortSignal): Promise<string> {
  if (Number(res.headers.get("content-length") ?? 0) > cap) {
    await res.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  if (!res.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > cap) {
        await reader.cancel().catch(() => {});
        throw tooLarge();
      }
      chunks.push(value);
    }
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    throw err;
  }
  return Buffer.concat(chunks).toString("utf8");
}

function resourceHeaders(resources: Readonly<Record<string, { key: string }>>): Record<string, string> {
  const names = Object.keys(resources);
  if (names.length === 0) return {};
  const headers: Record<string, string> = {
    "conveyor-resources": JSON.stringify(Object.fromEntries(names.map((n) => [n, resources[n]!.key]))),
  };
  for (const n of names) headers[`conveyor-resource-${n}`] = resources[n]!.key;
  return headers;
}

/** JSON text with every character outside printable ASCII as a \u escape (still the same JSON). */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[^\x20-\x7e]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

export function httpHandler(url: string): Handler {
  return {
    kind: "http",
    async run(job, ctx) {
      const { text, status } = await post(
        url,
        {
          "conveyor-job-id": job.id,
          "conveyor-queue": job.queue,
          "conveyor-attempt": String(job.attempt),
          "conveyor-execution-id": job.executionId,
          ...(job.task ? { "conveyor-task": job.task } : {}),
          // (the earlier failed attempts' errors, JSON with non-ASCII escaped: a header is Latin-1)
          ...(job.previousErrors.length > 0
            ? { "conveyor-previous-errors": asciiJson(job.previousErrors) }
            : {}),
          ...(job.parents ? { "conveyor-parents": asciiJson(job.parents) } : {}),
          ...(ctx.callback
            ? {
                "conveyor-callback-url": ctx.callback.url,
                "conveyor-callback-token": ctx.callback.token,
              }
            : {}),
          // the key granted per resource (`conveyor-resource-openai: k2`, and all of them as
          // `conveyor-resources: {"openai":"k2"}`, names as written): docs/budgets.md
          ...resourceHeaders(ctx.resources),
        },
        JSON.stringify(job.data),
        ctx.signal,
        ctx.resources,
      );
      if (text.trim() === "") return null;
      try {
        return JSON.parse(text);
      } catch {
        throw new HandlerError(
          `handler sidecar answered ${status} with a body that is not JSON: ${JSON.stringify(text.slice(0, 200))}`,
          { retryable: true },
        );
      }
    },
    // A batch call (docs/batches.md): `{"jobs": [...]}` in, `{"outcomes": [...]}` out, one per job.
    async batch(jobs, ctx) {
      const resources: Record<string, { key: string }> = {};
      for (const c of ctx.contexts) Object.assign(resources, c.resources);
      const body = {
        jobs: batchJobs(jobs, ctx.contexts),
      };
      const { text } = await post(
        url,
        { "conveyor-batch": String(jobs.length), "conveyor-queue": jobs[0]?.queue ?? "" },
        JSON.stringify(body),
        ctx.signal,
        resources,
      );
      return batchOutcomes(text, jobs.length, "handler sidecar");
    },
  };
}

/** A batch call's jobs as http and command handlers get them: each with what its own call would carry. */
export function batchJobs(jobs: readonly JobView[], contexts: readonly HandlerContext[]): unknown[] {
  return jobs.map((job, i) => {
    const c = contexts[i]!;
    return {
      id: job.id,
      queue: job.queue,
      data: job.data,
      attempt: job.attempt,
      executionId: job.executionId,
      ...(job.task ? { task: job.task } : {}),
      previousErrors: job.previousErrors,
      ...(job.parents ? { parents: job.parents } : {}),
      ...(c.callback ? { callback: c.callback } : {}),
      ...(Object.keys(c.resources).length > 0 ? { resources: c.resources } : {}),
    };
  });
}

/**
 * A batch answer `{"outcomes": [{"result": …} | {"error": {"name", "message", "stack"?},
 * "retryable": false?}, …]}` as one result or Error per job; a malformed answer fails the call
 * (every job of it) with what is wrong. `kindLabel` names the handler in messages.
 */
export function batchOutcomes(text: string, n: number, kindLabel: string): unknown[] {
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    throw new HandlerError(
      `${kindLabel} answered a batch with a body that is not JSON: ${JSON.stringify(text.slice(0, 200))}`,
      { retryable: true },
    );
  }
  const outcomes = (answer as { outcomes?: unknown } | null)?.outcomes;
  if (!Array.isArray(outcomes))
    throw new HandlerError(
      `${kindLabel} answered a batch without an "outcomes" array: expected {"outcomes": [{"result": …} | {"error": {"name", "message"}}, …]}`,
      { retryable: true },
    );
  if (outcomes.length !== n)
    throw new HandlerError(
      `${kindLabel} answered ${outcomes.length} outcome(s) for ${n} job(s): one outcome per job, in order, is expected`,
      { retryable: true },
    );
  return outcomes.map((o: unknown, i) => {
    if (typeof o !== "object" || o === null || Array.isArray(o))
      return new HandlerError(`${kindLabel}: outcome ${i} is not an object {"result"} or {"error"}`, {
        retryable: true,
      });
    const { result, error, retryable } = o as { result?: unknown; error?: unknown; retryable?: unknown };
    if (error === undefined) {
      if (!("result" in o))
        return new HandlerError(`${kindLabel}: outcome ${i} has neither "result" nor "error"`, {
          retryable: true,
        });
      return result;
    }
    return (
      foreignError(error, kindLabel, { retryable: retryable !== false }) ??
      new HandlerError(
        `${kindLabel}: outcome ${i} has an error that is not {"name", "message"}: ${JSON.stringify(error).slice(0, 200)}`,
        { retryable: retryable !== false },
      )
    );
  });
}

/** POST `body` to the sidecar; its answer's text, or the failure its status calls for. */
async function post(
  url: string,
  headers: Record<string, string>,
  body: string,
  signal: AbortSignal,
  resources: Readonly<Record<string, { key: string }>>,
): Promise<{ text: string; status: number }> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      // Not followed: the callback token and the job data would go wherever the sidecar points.
      redirect: "manual",
      signal,
      headers: {
        "content-type": "application/json",
        ...headers,
        // W3C traceparent/tracestate of the job's process span, while tracing is on
        ...activeTraceHeaders(),
      },
      body,
    });
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    throw new HandlerError(`handler sidecar ${url} unreachable: ${(err as Error).message}`, {
      retryable: true,
      cause: err,
    });
  }
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel().catch(() => {});
    throw new HandlerError(
      `handler sidecar answered ${res.status}, a redirect to ${JSON.stringify(res.headers.get("location") ?? "")}: redirects are not followed (the request carries the callback token and the job data)`,
      { retryable: false },
    );
  }
  const text = await readCapped(res, MAX_RESPONSE_BYTES, signal);
  if (!res.ok) {
    // 4xx means the sidecar judged the input bad: retrying the same input cannot help
    // (except timeouts and rate limits, which can).
    // A 429 for a job holding a resource key sidelines that key (Retry-After) and hands the job
    // back without an attempt; `Conveyor-Resource` names the resource when the job has several.
    if (res.status === 429 && Object.keys(resources).length > 0) {
      const resource = res.headers.get("conveyor-resource")?.trim();
      throw new RateLimitedError(`handler sidecar answered 429: ${text.slice(0, 500)}`, {
        retryAfterMs: parseRetryAfter(res.headers.get("retry-after")),
        ...(resource ? { resource } : {}),
      });
    }
    const retryable = res.status >= 500 || res.status === 408 || res.status === 429;
    // A sidecar that sends the error envelope (conveyor.handler does) has its failure stored
    // as its own: its exception type, message and traceback.
    const err =
      foreignError(text, "handler sidecar", { retryable }) ??
      new HandlerError(`handler sidecar answered ${res.status}: ${text.slice(0, 500)}`, { retryable });
    // `Conveyor-Failure: dependency`: something the sidecar depends on failed (circuit breaker).
    if (retryable && res.headers.get("conveyor-failure")?.trim().toLowerCase() === "dependency")
      throw dependencyFailure(err);
    throw err;
  }
  return { text, status: res.status };
}
