// Server-Sent Events: every transition of every (allowed) queue, or of one queue, pushed as it
// happens from the shared event hub. The event id is the queue stream's entry id (with `/part`
// for the later jobs of a batch entry); a browser that reconnects sends it back as
// Last-Event-ID and gets the missed events from each stream first, or a `gap` event for a queue
// whose stream no longer holds them. The reply starts once the hub follows every queue, so an
// event that happens after the client has the headers reaches it.
import { eventAfter, PipelineKeys, pipelineOf, type QueueEvent } from "../../queue/index.ts";
import type { ApiContext } from "../context.ts";
import { parseEventId, sseEventId } from "../eventHub.ts";
import { HttpError } from "../http.ts";
import type { Handlers } from "../router.ts";
import { groupInScope, queueInScope } from "../tokens.ts";

const HEARTBEAT_MS = 15_000;
/** A client this far behind is cut off; it reconnects with Last-Event-ID and reads the gap. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

/** An event as an SSE frame, made once however many clients receive it. */
const frames = new WeakMap<QueueEvent, string>();
function frame(e: QueueEvent): string {
  let f = frames.get(e);
  if (f === undefined) {
    const { type, id, queue, at } = e;
    const { token: _lease, ...fields } = e.fields; // the lease token stays server-side
    f = `id: ${sseEventId(e)}\nevent: job\ndata: ${JSON.stringify({ ...fields, type, id, queue, at })}\n\n`;
    frames.set(e, f);
  }
  return f;
}

export function eventHandlers(ctx: ApiContext): Handlers {
  return {
    async events({ req, res, query, principal }) {
      const scope = principal.scope;
      const only = query.queue as string | undefined; // the router checked the allow-list
      const header = req.headers["last-event-id"];
      const lastId = typeof header === "string" && header !== "" ? parseEventId(header) : undefined;
      if (lastId === null)
        throw HttpError.field(
          400,
          "header.Last-Event-ID",
          "Last-Event-ID must be an event id like 1700000000000-0 or 1700000000000-0/3",
          "invalid_field",
        );
      const lastSent = new Map<string, { eventId: string; part: number }>();
      const wanted = (queue: string) =>
        (only ? queue === only : ctx.auth.queueAllowed(queue)) && queueInScope(scope, queue);
      // A group-scoped token: the events of its groups' jobs (events do not carry the group: the
      // job's is read once and remembered; a job of no group belongs to no tenant).
      const groupOf = new Map<string, string | null>();
      const lookUp = async (batch: QueueEvent[]) => {
        const todo = [...new Set(batch.filter((e) => e.id && !groupOf.has(`${e.queue}\u0000${e.id}`)))];
        const groups = await Promise.all(
          todo.map((e) => ctx.redis.hget(new PipelineKeys(pipelineOf(e.queue)).job(e.id!), "group")),
        );
        if (groupOf.size > 10_000) groupOf.clear();
        todo.forEach((e, i) => groupOf.set(`${e.queue}\u0000${e.id}`, groups[i] || null));
      };
      const visible = (e: QueueEvent) =>
        wanted(e.queue) && (!scope?.groups || groupInScope(scope, groupOf.get(`${e.queue}\u0000${e.id}`)));
      // One write per batch: thousands of small writes per second per client cost memory.
      const write = (batch: QueueEvent[]) => {
        let out = "";
        for (const e of batch) {
          if (!visible(e)) continue;
          const prev = lastSent.get(e.queue);
          if (prev && !eventAfter(e, prev.eventId, prev.part)) continue;
          lastSent.set(e.queue, e);
          out += frame(e);
        }
        if (out === "") return;
        res.write(out);
        if (res.writableLength > MAX_BUFFERED_BYTES) res.destroy();
      };
      // With groups to look up, batches are written in turn once their jobs' groups are known.
      let turn = Promise.resolve();
      const deliver = (batch: QueueEvent[]) => {
        if (!scope?.groups) return write(batch);
        turn = turn
          .then(() => lookUp(batch.filter((e) => wanted(e.queue))))
          .then(() => write(batch))
          .catch(() => void res.destroy());
      };
      // Held until the headers and any replay are written.
      let replay: QueueEvent[] | null = [];
      const unsubscribe = ctx.hub.subscribe(
        (batch) => (replay ? replay.push(...batch) : deliver(batch)),
        (queues) =>
          res.headersSent && res.write(`event: queues\ndata: ${JSON.stringify(queues.filter(wanted))}\n\n`),
      );
      ctx.metrics.eventStreams.inc();
      let heartbeat: ReturnType<typeof setInterval> | undefined;
      let closed = false;
      const close = () => {
        if (closed) return;
        closed = true;
        clearInterval(heartbeat);
        unsubscribe();
        ctx.metrics.eventStreams.dec();
      };
      req.once("close", close);
      res.once("close", close);
      await ctx.hub.ready();
      if (res.destroyed) return undefined;
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
        connection: "keep-alive",
        "x-accel-buffering": "no", // nginx Ingress: do not buffer the stream
      });
      res.write("retry: 2000\n\n");
      heartbeat = setInterval(() => res.write(": ping\n\n"), HEARTBEAT_MS);

      try {
        if (lastId) {
          const queues = only ? [only] : (await ctx.directory.list()).filter(wanted);
          for (const q of queues) {
            const { events, gap } = await ctx.hub.since(q, lastId.eventId, lastId.part);
            // Before the events that are left: the client knows its view misses some and reloads.
            if (gap)
              res.write(`event: gap\ndata: ${JSON.stringify({ queue: q, after: header, reason: gap })}\n\n`);
            deliver(events);
          }
        }
      } finally {
        const held = replay ?? [];
        replay = null;
        deliver(held);
      }
      return undefined;
    },
  };
}
