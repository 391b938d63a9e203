// One writer for the worker's stdout, whole lines only. The worker's JSON log lines and whatever
// a module handler (or a library) writes with process.stdout.write / console.log share fd 1.
// Written independently (pino through its own buffer, process.stdout through libuv's queue),
// a handler's partial line, or a large write cut short by a full pipe, would sit in front of
// the next log line, and `kubectl logs | jq` needs one JSON object per line. So process.stdout
// is routed into the logger's destination, a line at a time: both go out in one order and no
// write of either lands inside a line of the other.
import type { pino } from "pino";

type Destination = ReturnType<typeof pino.destination>;

/** A partial line waits this long for its newline before it is written out as a line. */
export const PARTIAL_LINE_HOLD_MS = 1000;
/** A line longer than this is cut into lines of this many bytes. */
export const MAX_LINE_BYTES = 64 * 1024;

const NL = 0x0a;

type WriteCallback = (err?: Error | null) => void;

/**
 * Route process.stdout.write into `sink` (the logger's destination on fd 1) as whole lines:
 * complete lines at once, a trailing partial line held until its newline arrives, it reaches
 * MAX_LINE_BYTES, PARTIAL_LINE_HOLD_MS pass, or the process exits. Lines are decoded as UTF-8.
 */
export function routeStdoutLines(sink: Destination): void {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let timer: NodeJS.Timeout | undefined;

  const takePending = (): Buffer[] => {
    const p = pending;
    pending = [];
    pendingBytes = 0;
    if (timer) clearTimeout(timer);
    timer = undefined;
    return p;
  };
  const emitPending = () => {
    if (pendingBytes > 0) sink.write(`${Buffer.concat(takePending()).toString("utf8")}\n`);
  };

  const write = (
    chunk: string | Uint8Array,
    encoding?: BufferEncoding | WriteCallback,
    cb?: WriteCallback,
  ) => {
    if (typeof encoding === "function") [cb, encoding] = [encoding, undefined];
    // The common case (console.log, a whole line as a string) goes straight through.
    if (
      typeof chunk === "string" &&
      pendingBytes === 0 &&
      chunk.endsWith("\n") &&
      (!encoding || encoding === "utf8")
    )
      sink.write(chunk);
    else addBytes(typeof chunk === "string" ? Buffer.from(chunk, encoding) : Buffer.from(chunk));
    if (cb) process.nextTick(cb);
    // Backpressure is the sink's business: a caller waiting for 'drain' from us would wait forever.
    return true;
  };

  const addBytes = (buf: Buffer) => {
    const nl = buf.lastIndexOf(NL);
    if (nl >= 0) {
      sink.write(Buffer.concat([...takePending(), buf.subarray(0, nl + 1)]).toString("utf8"));
      buf = buf.subarray(nl + 1);
    }
    while (pendingBytes + buf.length >= MAX_LINE_BYTES) {
      const take = MAX_LINE_BYTES - pendingBytes;
      pending.push(buf.subarray(0, take));
      pendingBytes += take;
      emitPending();
      buf = buf.subarray(take);
    }
    if (buf.length === 0) return;
    pending.push(buf);
    pendingBytes += buf.length;
    timer ??= setTimeout(emitPending, PARTIAL_LINE_HOLD_MS).unref();
  };

  process.stdout.write = write as typeof process.stdout.write;
  // Runs after pino's own exit flush (registered when the destination was made), so this flush
  // writes what is left: the held partial line.
  process.on("exit", () => {
    emitPending();
    try {
      sink.flushSync();
    } catch {
      // stdout gone (EPIPE): nothing to save
    }
  });
}
