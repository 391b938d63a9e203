// The audit trail: every state change through the job API (enqueue excepted: it is in the event
// stream) as who (token name), what (verb, operation, target, parameters with secrets removed),
// when, from where and its outcome (status, jobs touched). In PostgreSQL the row is written
// before the change and its outcome after: a change whose row cannot be written is refused
// (503), and a change whose outcome cannot be written keeps its row with status null. Without
// PostgreSQL the entries are JSON lines on stdout.
import type pg from "pg";
import { redact } from "../queue/index.ts";
import { HttpError } from "./http.ts";

export interface AuditEntry {
  token: string;
  verb: string;
  operation: string;
  target: string;
  params: Record<string, unknown>;
  client: string | null;
}

export interface AuditRow extends AuditEntry {
  id: string;
  at: string;
  status: number | null;
  jobs: number | null;
  result: unknown;
}

export interface AuditFilter {
  since?: number;
  token?: string;
  verb?: string;
  target?: string;
  limit: number;
}

export interface AuditLog {
  /** Before the change: a handle to record its outcome with. Throws when the entry cannot be kept. */
  begin(e: AuditEntry): Promise<(status: number, result: unknown) => Promise<void>>;
  list(f: AuditFilter): Promise<AuditRow[]>;
  /** Deletes rows older than the retention (ms); returns how many. */
  expire(retentionMs: number): Promise<number>;
}

const MAX_PARAM_BYTES = 16 * 1024;

export function auditParams(params: Record<string, unknown>): Record<string, unknown> {
  const kept = redact(params) as Record<string, unknown>;
  const text = JSON.stringify(kept);
  if (Buffer.byteLength(text) <= MAX_PARAM_BYTES) return kept;
  const body = kept.body;
  return {
    ...kept,
    body:
      body && typeof body === "object" && !Array.isArray(body)
        ? { truncated: true, fields: Object.keys(body) }
        : { truncated: true },
  };
}

/** How many jobs a reply says it touched: a count field, or one for a job route that succeeded. */
export function jobsTouched(operation: string, status: number, body: unknown): number | null {
  if (status >= 400) return 0;
  const b = (body ?? {}) as Record<string, unknown>;
  for (const k of ["cancelled", "retried", "purged", "deleted", "promoted"])
    if (typeof b[k] === "number") return b[k] as number;
  if (["cancelJob", "retryJob", "promoteJob"].includes(operation)) return 1;
  return null;
}

export class PgAudit implements AuditLog {
  private readonly db: pg.Pool;
  constructor(db: pg.Pool) {
    this.db = db;
  }

  async begin(e: AuditEntry) {
    let id: string;
    try {
      const r = await this.db.query<{ id: string }>(
        `INSERT INTO conveyor_audit (token, verb, operation, target, params, client)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
        [e.token, e.verb, e.operation, e.target, JSON.stringify(e.params), e.client],
      );
      id = r.rows[0]!.id;
    } catch (err) {
      throw new HttpError(
        503,
        `nothing changed: the audit trail could not be written (${(err as Error).message})`,
        { "retry-after": "1" },
        null,
        "audit_unavailable",
      );
    }
    return async (status: number, result: unknown) => {
      await this.db.query("UPDATE conveyor_audit SET status = $2, jobs = $3, result = $4 WHERE id = $1", [
        id,
        status,
        jobsTouched(e.operation, status, result),
        JSON.stringify(auditParams({ result }).result ?? null),
      ]);
    };
  }

  async list(f: AuditFilter): Promise<AuditRow[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    const add = (sql: string, v: unknown) => {
      args.push(v);
      where.push(sql.replace("?", `$${args.length}`));
    };
    if (f.since !== undefined) add("at >= to_timestamp(? / 1000.0)", f.since);
    if (f.token !== undefined) add("token = ?", f.token);
    if (f.verb !== undefined) add("verb = ?", f.verb);
    if (f.target !== undefined) add("target LIKE ? ESCAPE '\\'", `${f.target.replace(/[\\%_]/g, "\\$&")}%`);
    args.push(f.limit);
    const r = await this.db.query(
      `SELECT id::text, at, token, verb, operation, target, params, client, status, jobs, result
         FROM conveyor_audit ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
        ORDER BY at DESC, id DESC LIMIT $${args.length}`,
      args,
    );
    return r.rows.map((x) => ({ ...x, at: (x.at as Date).toISOString() }));
  }

  async expire(retentionMs: number): Promise<number> {
    const r = await this.db.query(
      "DELETE FROM conveyor_audit WHERE at < now() - $1 * interval '1 millisecond'",
      [retentionMs],
    );
    return r.rowCount ?? 0;
  }
}

/** Without PostgreSQL: one JSON line per change on stdout, its outcome in a second line. */
export class StdoutAudit implements AuditLog {
  private readonly write: (line: string) => void;
  private seq = 0;
  constructor(write: (line: string) => void = (l) => void process.stdout.write(`${l}\n`)) {
    this.write = write;
  }
  async begin(e: AuditEntry) {
    const id = String(++this.seq);
    const at = new Date().toISOString();
    this.write(JSON.stringify({ audit: { id, at, ...e } }));
    return async (status: number, result: unknown) => {
      this.write(JSON.stringify({ audit: { id, status, jobs: jobsTouched(e.operation, status, result) } }));
    };
  }
  async list(): Promise<AuditRow[]> {
    throw new HttpError(
      503,
      "the audit trail is kept in PostgreSQL: start with --database / DATABASE_URL (without it, it is on the API's stdout)",
    );
  }
  async expire(): Promise<number> {
    return 0;
  }
}
