// The worker's spans: one CONSUMER `process {queue}` span per execution, parented on and
// linked to the context the job was created in (its record's `trace` field), with the
// handler run inside it; PRODUCER `send {queue}` spans for stage hand-overs and fan-outs; span
// events for redeliveries, lost leases, fencing and hand-backs. While tracing is off
// (queue/tracing.ts: no OTEL_* export asked for) the worker gets NO_TRACE, whose methods do
// nothing, and the job's trace field is passed on unchanged.
import { context, trace, SpanKind, SpanStatusCode, type Attributes, type Span } from "@opentelemetry/api";
import type { ClaimedJob } from "../queue/index.ts";
import {
  activeTracer,
  endSpan,
  messagingAttributes,
  parseTraceField,
  startSendSpan,
  traceFieldOfSpan,
} from "../queue/tracing.ts";

/** What the worker tells an execution's span; every method is cheap when tracing is off. */
export interface ExecutionTrace {
  /** Run the handler inside the process span (so instrumented calls nest under it). */
  run<T>(fn: () => T): T;
  /** The trace field for the job's hand-over to `nextQueue` ('' = keep the job's own). */
  handOver(nextQueue: string, id: string): string;
  /** Trace fields for a fan-out of job `id`: one per child (`<id>:<n>`) and one for the join. */
  fanOut(nextQueue: string, id: string, children: number): { join: string; children: string[] } | undefined;
  /** A span event: what happened to the execution and why. */
  event(name: string, attributes?: Attributes): void;
  /** End the span with its outcome; `error` marks it failed. */
  end(outcome: string, error?: unknown): void;
}

export const NO_TRACE: ExecutionTrace = {
  run: (fn) => fn(),
  handOver: () => "",
  fanOut: () => undefined,
  event: () => {},
  end: () => {},
};

/** A worker serves one queue: its span name and fixed attributes are made once. */
let perQueue: { queue: string; name: string; attributes: Attributes } | undefined;

/** The span of one execution of `job`, or NO_TRACE while tracing is off. */
export function traceExecution(job: ClaimedJob): ExecutionTrace {
  const tracer = activeTracer();
  if (!tracer) return NO_TRACE;
  if (perQueue?.queue !== job.queue)
    perQueue = {
      queue: job.queue,
      name: `process ${job.queue}`,
      attributes: messagingAttributes("process", job.queue),
    };
  const created = parseTraceField(job.trace);
  const parent = created?.context ?? context.active();
  // Links and attributes are added once the sampler has decided, not given to startSpan: the
  // SDK validates those given at creation before sampling, and an unsampled span needs none. The
  // specification's samplers (the OTEL_TRACES_SAMPLER values) read neither. Few attributes: each
  // costs on every span; the worker's identity is a resource attribute (service.instance.id).
  const span = tracer.startSpan(perQueue.name, { kind: SpanKind.CONSUMER }, parent);
  if (!span.isRecording()) return new ExecutionSpan(span);
  if (created) span.addLinks(created.links);
  span.setAttributes(perQueue.attributes);
  span.setAttribute("messaging.message.id", job.id);
  span.setAttribute("conveyor.job.attempt", job.attempt);
  span.setAttribute("conveyor.execution.id", job.token);
  if (job.stalls > 0) span.setAttribute("conveyor.job.stalls", job.stalls);
  if (job.requeued) {
    const colon = job.requeued.indexOf(":");
    span.addEvent("redelivered", {
      "conveyor.redelivery.cause": colon > 0 ? job.requeued.slice(0, colon) : job.requeued,
      "conveyor.redelivery.reason": colon > 0 ? job.requeued.slice(colon + 1).trim() : "",
    });
  }
  return new ExecutionSpan(span);
}

class ExecutionSpan implements ExecutionTrace {
  private readonly span: Span;
  private readonly ctx;
  private ended = false;

  constructor(span: Span) {
    this.span = span;
    this.ctx = trace.setSpan(context.active(), span);
  }

  run<T>(fn: () => T): T {
    return context.with(this.ctx, fn);
  }

  handOver(nextQueue: string, id: string): string {
    return this.send(nextQueue, [id])[0] ?? "";
  }

  fanOut(nextQueue: string, id: string, children: number): { join: string; children: string[] } {
    const ids = Array.from({ length: children }, (_, i) => `${id}:${i + 1}`);
    // The join is created by the child that finishes last; its context is this execution's.
    return { join: traceFieldOfSpan(this.span), children: this.send(nextQueue, ids) };
  }

  /** One PRODUCER span per job sent on, each a child of this execution, ended at once. */
  private send(queue: string, ids: string[]): string[] {
    const fields: string[] = [];
    for (const id of ids) {
      const sent = startSendSpan(queue, [id], this.ctx);
      if (!sent) break;
      sent.span.end();
      fields.push(sent.field);
    }
    return fields;
  }

  event(name: string, attributes?: Attributes): void {
    this.span.addEvent(name, attributes);
  }

  end(outcome: string, error?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.span.setAttribute("conveyor.job.outcome", outcome);
    if (outcome === "fenced")
      this.span.addEvent("fenced", {
        "conveyor.reason": "the lease moved on before the outcome was written: refused by the fencing token",
      });
    if (error !== undefined) endSpan(this.span, error);
    else {
      if (outcome === "fenced" || outcome === "leaseLost")
        this.span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
      this.span.end();
    }
  }
}
