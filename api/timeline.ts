// A job's timeline for the dashboard: the queue's event stream is capped (10,000 entries), so on
// a busy queue a job's early entries are trimmed long before the job is forgotten. What the
// stream no longer holds is filled from the job records (its creation and every execution's
// start and end), marked as such; without records the page says that entries are missing.

export interface TimelineEntry {
  eventId: string;
  type: string;
  /** ms since the epoch, as text (what the stream's entries carry). */
  at?: string;
  source?: "records";
  [field: string]: unknown;
}

export interface RecordedExecution {
  execution: string;
  queue: string;
  startedAt: string | Date | null;
  finishedAt: string | Date | null;
  outcome: string;
  reason: string | null;
}

const ms = (t: string | Date | null): number | null => (t === null ? null : new Date(t).getTime());

/**
 * The stream's entries for the job, preceded by what the records know from before the oldest
 * entry the scan saw (`scannedFrom`, ms; null when the stream is empty). `trimmed` is true when
 * the job is older than that entry: its early history is not in the stream.
 */
export function jobTimeline(opts: {
  stream: TimelineEntry[];
  scannedFrom: number | null;
  createdAt: number | null;
  executions: readonly RecordedExecution[];
}): { events: TimelineEntry[]; trimmed: boolean } {
  const { stream, scannedFrom, createdAt } = opts;
  const trimmed = createdAt !== null && (scannedFrom === null || createdAt < scannedFrom);
  if (!trimmed) return { events: stream, trimmed };
  const before = (t: number | null): t is number => t !== null && (scannedFrom === null || t < scannedFrom);
  const filled: TimelineEntry[] = [];
  const add = (at: number, type: string, fields: Record<string, unknown>) =>
    filled.push({ eventId: `records-${filled.length}`, type, at: String(at), source: "records", ...fields });
  if (before(createdAt)) add(createdAt, "enqueued", {});
  for (const x of opts.executions) {
    const started = ms(x.startedAt);
    const finished = ms(x.finishedAt);
    if (before(started)) add(started, "started", { queue: x.queue });
    if (before(finished) && x.outcome !== "running")
      add(finished, x.outcome, { queue: x.queue, ...(x.reason ? { reason: x.reason } : {}) });
  }
  filled.sort((a, b) => Number(a.at) - Number(b.at));
  return { events: [...filled, ...stream], trimmed };
}
