// `conveyor audit`: the job API's audit trail from PostgreSQL (api/audit.ts), newest first;
// --json prints one JSON line per row (an export).
import { DATABASE_URL_SETTING, JSON_SETTING } from "../../lib/settings.ts";
import { parseDuration } from "../../queue/index.ts";
import { defineCommand, print, UsageError } from "../command.ts";

const records = () => import("../../records/index.ts");
const audit = () => import("../../api/audit.ts");

/** `--since 1h` (that long ago) or an ISO time. */
function sinceMs(text: string): number {
  if (/^\d{4}-\d\d-\d\d/.test(text)) {
    const t = Date.parse(text);
    if (Number.isNaN(t)) throw new UsageError(`--since: ${JSON.stringify(text)} is not a time`);
    return t;
  }
  try {
    return Date.now() - parseDuration(text);
  } catch (err) {
    throw new UsageError(`--since: ${(err as Error).message} (a duration like 1h, or an ISO time)`);
  }
}

export default defineCommand({
  name: "audit",
  args: [],
  settings: {
    json: JSON_SETTING,
    database: {
      ...DATABASE_URL_SETTING,
      help: "the PostgreSQL database the job API keeps its audit trail in",
    },
    since: { kind: "string", arg: "1h|ISO", help: "only rows from this long ago (or this time) on" },
    token: { kind: "string", arg: "NAME", help: "only this token's changes" },
    verb: { kind: "string", arg: "operate|admin", help: "only this verb's changes" },
    target: { kind: "string", arg: "QUEUE", help: "only targets starting with this (a queue)" },
    limit: { kind: "int", arg: "N", min: 1, max: 10000, default: 100, help: "at most this many rows" },
  },
  async run(o) {
    const url = o.raw("database");
    if (!url)
      throw new UsageError("audit needs --database URL (or DATABASE_URL): the trail is kept in PostgreSQL");
    const since = o.raw("since");
    const verb = o.raw("verb");
    if (verb !== undefined && verb !== "operate" && verb !== "admin")
      throw new UsageError(`--verb must be operate or admin, got ${JSON.stringify(verb)}`);
    const { createPool } = await records();
    const { PgAudit } = await audit();
    const pool = createPool(url, { applicationName: "conveyor-cli", queryTimeoutMs: 10_000 });
    try {
      const rows = await new PgAudit(pool).list({
        since: since === undefined ? undefined : sinceMs(since),
        token: o.raw("token"),
        verb,
        target: o.raw("target"),
        limit: o.int("limit"),
      });
      for (const r of rows)
        print(
          o.bool("json")
            ? JSON.stringify(r)
            : `${r.at}  ${r.token}  ${r.verb} ${r.operation}  ${r.target}  ${r.status ?? "?"}${r.jobs === null ? "" : `  ${r.jobs} jobs`}  from ${r.client ?? "?"}`,
        );
    } finally {
      await pool.end();
    }
    return 0;
  },
});
