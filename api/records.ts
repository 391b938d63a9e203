// The job records as the job API serves them: records/queries.ts reads them; here a page's
// position becomes an opaque cursor and a value PostgreSQL cannot read becomes a 400.
import type pg from "pg";
import type { FlowView } from "../queue/index.ts";
import { decodeCursor, encodeCursor } from "./cursor.ts";
import { HttpError } from "./http.ts";
import {
  isRecordsPosition,
  recordedFlow,
  RecordsQueries,
  RecordsQueryError,
  type FlowJobRow,
  type JobRow,
  type MinuteStats,
  type RecordedStage,
  type RecordsPage,
  type StatsWindow,
} from "../records/index.ts";

export interface Page<T> {
  items: T[];
  /** Pass as `cursor` for the next (older) page; null on the last page. */
  next: string | null;
}

/** `field=value` in a search: an optional part (data: or result:), a dotted path and the value. */
export const FIELD_QUERY = /^(?:(data|result):)?([A-Za-z_$][\w$-]*(?:\.[\w$-]+){0,15})=(.*)$/s;

const after = (cursor: string | undefined) => (cursor ? decodeCursor(cursor, isRecordsPosition) : undefined);

const withCursor = (p: RecordsPage): Page<JobRow> => ({
  items: p.items,
  next: p.next ? encodeCursor(p.next) : null,
});

async function served<T>(read: Promise<T>): Promise<T> {
  try {
    return await read;
  } catch (err) {
    if (err instanceof RecordsQueryError) throw new HttpError(400, `bad query value: ${err.message}`);
    throw err;
  }
}

export class JobRecords {
  private readonly q: RecordsQueries;
  constructor(pool: pg.Pool) {
    this.q = new RecordsQueries(pool);
  }

  close(): Promise<void> {
    return this.q.close();
  }

  async listJobs(opts: {
    queue: string;
    state: string;
    cursor?: string;
    limit: number;
    from?: number;
    to?: number;
    groups?: string[] | null;
  }): Promise<Page<JobRow>> {
    const { cursor, ...rest } = opts;
    return withCursor(await served(this.q.listJobs({ ...rest, after: after(cursor) })));
  }

  byId(id: string, limit?: number): Promise<JobRow[]> {
    return served(this.q.byId(id, limit));
  }

  byIdempotencyKey(key: string, limit?: number): Promise<JobRow[]> {
    return served(this.q.byIdempotencyKey(key, limit));
  }

  byTask(task: string, limit?: number): Promise<JobRow[]> {
    return served(this.q.byTask(task, limit));
  }

  flowJobs(flowId: string, limit?: number): Promise<FlowJobRow[]> {
    return served(this.q.flowJobs(flowId, limit));
  }

  /** A flow as the records keep it (records/flows.ts), or null. */
  flow(id: string, pipeline?: string): Promise<FlowView | null> {
    return served(recordedFlow(this.q, id, pipeline));
  }

  async byField(opts: {
    part?: "data" | "result";
    path: string[];
    value: string;
    cursor?: string;
    limit: number;
    queues?: string[] | null;
    groups?: string[] | null;
  }): Promise<Page<JobRow>> {
    const { cursor, ...rest } = opts;
    return withCursor(await served(this.q.byField({ ...rest, after: after(cursor) })));
  }

  groupOutcomes(queues: string[], groups: string[]): ReturnType<RecordsQueries["groupOutcomes"]> {
    return served(this.q.groupOutcomes(queues, groups));
  }

  groupRecent(queues: string[], groups: string[], limit: number): Promise<JobRow[]> {
    return served(this.q.groupRecent(queues, groups, limit));
  }

  job(pipeline: string, id: string): ReturnType<RecordsQueries["job"]> {
    return served(this.q.job(pipeline, id));
  }

  executions(pipeline: string, id: string): Promise<Record<string, unknown>[]> {
    return served(this.q.executions(pipeline, id));
  }

  stages(pipeline: string, id: string): Promise<RecordedStage[]> {
    return served(this.q.stages(pipeline, id));
  }

  children(
    pipeline: string,
    id: string,
    limit?: number,
  ): Promise<{ id: string; queue: string; state: string }[]> {
    return served(this.q.children(pipeline, id, limit));
  }

  minuteStats(queue: string, window?: StatsWindow, now?: number): Promise<MinuteStats[]> {
    return served(this.q.minuteStats(queue, window, now));
  }
}
