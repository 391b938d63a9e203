// Server-Sent Events: every transition of every (allowed) queue, or of one queue, pushed as it
// happens from the shared event hub. The event id is the queue stream's entry id; a browser
// that reconnects sends it back as Last-Event-ID and gets the gap from each stream first.
import type { QueueEvent } from "../../queue/index.ts";
import type { ApiContext } from "../context.ts";
import { STREAM_ID, streamIdAfter } from "../eventHub.ts";
import { HttpError } from "../http.ts";
import type { Handlers } from "../router.ts";

const HEARTBEAT_MS = 15_000;
/** A client this far behind is cut off; it reconnects with Last-Event-ID and reads the gap. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

export function eventHandlers(ctx: ApiContext): Handlers {
  return {
    async events({ req, res, query }) {
      const only = query.queue as string | undefined;
      if (only) ctx.auth.assertQueue(only);
      const header = req.headers["last-event-id"];
      const lastId = typeof header === "string" && header !== "" ? header : undefined;
      if (lastId !== undefined && !STREAM_ID.test(lastId))
        throw new HttpError(400, "Last-Event-ID must be a stream id like 1700000000000-0");
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
        connection: "keep-alive",
        "x-accel-buffering": "no", // nginx Ingress: do not buffer the stream
      });
      res.write("retry: 2000\n\n");

      const lastSent = new Map<string, string>();
      const wanted = (queue: string) => (only ? queue === only : ctx.auth.queueAllowed(queue));
      const write = (e: QueueEvent) => {
        if (!wanted(e.queue)) return;
        const prev = lastSent.get(e.queue);
        if (prev && !streamIdAfter(e.eventId, prev)) return;
        lastSent.set(e.queue, e.eventId);
        const { type, id, queue, at } = e;
        const { token: _lease, ...fields } = e.fields; // the lease token stays server-side
        res.write(
          `id: ${e.eventId}\nevent: job\ndata: ${JSON.stringify({ ...fields, type, id, queue, at })}\n\n`,
        );
        if (res.writableLength > MAX_BUFFERED_BYTES) res.destroy();
      };
      let replay: QueueEvent[] | null = lastId ? [] : null;
      const unsubscribe = ctx.hub.subscribe(
        (e) => (replay ? replay.push(e) : write(e)),
        (queues) => res.write(`event: queues\ndata: ${JSON.stringify(queues.filter(wanted))}\n\n`),
      );
      const heartbeat = setInterval(() => res.write(": ping\n\n"), HEARTBEAT_MS);
      const close = () => {
        clearInterval(heartbeat);
        unsubscribe();
      };
      req.once("close", close);
      res.once("close", close);
      if (lastId) {
        try {
          const queues = only ? [only] : (await ctx.directory.list()).filter(wanted);
          for (const q of queues) for (const e of await ctx.hub.since(q, lastId)) write(e);
        } finally {
          const held = replay ?? [];
          replay = null;
          for (const e of held) write(e);
        }
      }
      return undefined;
    },
  };
}
