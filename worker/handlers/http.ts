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
      let res: Response;
      try {
        res = await fetch(url, {
          method: "POST",
          // Not followed: the callback token and the job data would go wherever the sidecar points.
          redirect: "manual",
          signal: ctx.signal,
          headers: {
            "content-type": "application/json",
            "conveyor-job-id": job.id,
            "conveyor-queue": job.queue,
            "conveyor-attempt": String(job.attempt),
            "conveyor-execution-id": job.executionId,
            ...(job.task ? { "conveyor-task": job.task } : {}),
            // (the earlier failed attempts' errors, JSON with non-ASCII escaped: a header is Latin-1)
            ...(job.previousErrors.length > 0
              ? { "conveyor-previous-errors": asciiJson(job.previousErrors) }
              : {}),
            ...(ctx.callback
              ? {
                  "conveyor-callback-url": ctx.callback.url,
                  "conveyor-callback-token": ctx.callback.token,
                }
              : {}),
            // the key granted per resource (`conveyor-resource-openai: k2`, and all of them as
            // `conveyor-resources: {"openai":"k2"}`, names as written): docs/budgets.md
            ...resourceHeaders(ctx.resources),
            // W3C traceparent/tracestate of the job's process span, while tracing is on
            ...activeTraceHeaders(),
          },
          body: JSON.stringify(job.data),
        });
      } catch (err) {
        if (ctx.signal.aborted) throw ctx.signal.reason;
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
      const text = await readCapped(res, MAX_RESPONSE_BYTES, ctx.signal);
      if (!res.ok) {
        // 4xx means the sidecar judged the input bad: retrying the same input cannot help
        // (except timeouts and rate limits, which can).
        // A 429 for a job holding a resource key sidelines that key (Retry-After) and hands the job
        // back without an attempt; `Conveyor-Resource` names the resource when the job has several.
        if (res.status === 429 && Object.keys(ctx.resources).length > 0) {
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
      if (text.trim() === "") return null;
      try {
        return JSON.parse(text);
      } catch {
        throw new HandlerError(
          `handler sidecar answered ${res.status} with a body that is not JSON: ${JSON.stringify(text.slice(0, 200))}`,
          { retryable: true },
        );
      }
    },
  };
}
