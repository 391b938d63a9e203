// A Server-Sent Events client for tests: open /events, collect the frames, wait for one.
import { pollUntil } from "./poll.ts";

export interface SseFrame {
  event: string;
  id: string | undefined;
  data: Record<string, unknown> | undefined;
}

export interface SseStream {
  status: number;
  frames: SseFrame[];
  /** The first frame (already received or to come) that `want` accepts. */
  next(what: string, want: (f: SseFrame) => boolean, timeoutMs?: number): Promise<SseFrame>;
  close(): void;
}

/** Resolves once the reply has started (for /events: once the server follows every queue). */
export async function openEvents(url: string, headers: Record<string, string>): Promise<SseStream> {
  const ac = new AbortController();
  const res = await fetch(url, { headers, signal: ac.signal });
  const frames: SseFrame[] = [];
  if (res.ok)
    void (async () => {
      const decoder = new TextDecoder();
      let text = "";
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          text += decoder.decode(chunk, { stream: true });
          const parts = text.split("\n\n");
          text = parts.pop()!;
          for (const p of parts) {
            const data = /^data: (.*)$/m.exec(p)?.[1];
            frames.push({
              event: /^event: (.*)$/m.exec(p)?.[1] ?? "message",
              id: /^id: (.*)$/m.exec(p)?.[1],
              data: data ? (JSON.parse(data) as Record<string, unknown>) : undefined,
            });
          }
        }
      } catch {
        // aborted by close()
      }
    })();
  else await res.body?.cancel();
  return {
    status: res.status,
    frames,
    next: (what, want, timeoutMs = 30_000) =>
      pollUntil(`SSE: ${what}`, async () => frames.find(want), { timeoutMs, intervalMs: 20 }),
    close: () => ac.abort(),
  };
}
