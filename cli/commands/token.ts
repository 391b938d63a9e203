// `conveyor token`: named API tokens with scopes in the file `conveyor api --tokens-file` serves
// (api/tokens.ts). Only the hash is stored; `create` prints the token once.
import {
  FULL_ACCESS,
  hashToken,
  newToken,
  parseScope,
  readTokensFile,
  TOKEN_NAME,
  TokensFileError,
  writeTokensFile,
  type Scope,
} from "../../api/tokens.ts";
import { hostname } from "node:os";
import { formatRateLimit, parseRateLimit, type RateLimit } from "../../queue/control.ts";
import { DATABASE_URL_SETTING, JSON_SETTING } from "../../lib/settings.ts";
import { defineCommand, print, UsageError } from "../command.ts";

const records = () => import("../../records/index.ts");
const audit = () => import("../../api/audit.ts");

/**
 * With --database: the change is written to the API's audit trail first (who: cli:<user>@<host>,
 * or CONVEYOR_AUDIT_ACTOR), and
 * not made when that fails; its outcome after.
 */
async function audited(
  url: string | undefined,
  operation: string,
  name: string,
  params: Record<string, unknown>,
  change: () => void,
): Promise<void> {
  if (!url) return change();
  const { createPool } = await records();
  const { PgAudit } = await audit();
  const { cliActor } = await import("../../queue/index.ts");
  const pool = createPool(url, { applicationName: "conveyor-cli", queryTimeoutMs: 10_000 });
  try {
    const finish = await new PgAudit(pool)
      .begin({
        token: cliActor(),
        verb: "admin",
        operation,
        target: `token:${name}`,
        params,
        client: hostname(),
      })
      .catch((err: Error) => {
        throw new UsageError(err.message);
      });
    change();
    await finish(200, { name });
  } finally {
    await pool.end();
  }
}

const USAGE = `token create <name> --scope 'pipeline=docs,groups=acme,verbs=read+enqueue' [--rate 50/s] --file tokens.yaml [--json]
  token list --file tokens.yaml [--json]
  token revoke <name> --file tokens.yaml`;

const describe = (s: Scope) =>
  [
    ["pipelines", s.pipelines],
    ["queues", s.queues],
    ["groups", s.groups],
  ]
    .map(([k, v]) => `${k as string}=${v ? (v as string[]).join("+") : "*"}`)
    .concat(`verbs=${s.verbs.join("+")}`)
    .join(",");

export default defineCommand({
  name: "token",
  args: ["create|revoke <name>", "list"],
  settings: {
    json: JSON_SETTING,
    database: {
      ...DATABASE_URL_SETTING,
      help: "create, revoke: write the change to the job API's audit trail in this PostgreSQL first",
    },
    file: { kind: "string", arg: "FILE", help: "the tokens file (YAML; created by create)" },
    rate: {
      kind: "string",
      arg: "N/s|m|h",
      help: "create: at most this many requests per second, minute or hour with this token, all API replicas together (429 beyond)",
    },
    scope: {
      kind: "string",
      arg: "SCOPE",
      help: "create: pipeline=a+b,queues=glob+glob,groups=x+y,verbs=read+enqueue+operate+admin (a kind left out: all)",
    },
  },
  async run(o) {
    const [action, name] = o.positionals;
    const file = o.raw("file");
    if (!action) throw new UsageError(USAGE);
    if (!file) throw new UsageError(`token ${action}: --file FILE names the tokens file`);
    const json = o.bool("json");
    const read = () => {
      try {
        return readTokensFile(file);
      } catch (err) {
        if (err instanceof TokensFileError) throw new UsageError(err.message);
        throw err;
      }
    };
    switch (action) {
      case "create": {
        if (!name || !TOKEN_NAME.test(name))
          throw new UsageError(`token create <name>: the name must match ${TOKEN_NAME.source}`);
        if (name === FULL_ACCESS.name)
          throw new UsageError(`token create: the name ${name} is CONVEYOR_API_TOKEN's in the audit trail`);
        const scopeText = o.raw("scope");
        if (!scopeText) throw new UsageError("token create needs --scope (e.g. 'verbs=read')");
        let scopes: Scope;
        try {
          scopes = parseScope(scopeText);
        } catch (err) {
          throw new UsageError(`--scope: ${(err as Error).message}`);
        }
        let rate: RateLimit | null = null;
        const rateText = o.raw("rate");
        if (rateText !== undefined)
          try {
            rate = parseRateLimit(rateText);
          } catch (err) {
            throw new UsageError(`--rate: ${(err as Error).message}`);
          }
        const entries = read();
        if (entries.some((e) => e.name === name))
          throw new UsageError(`token ${name} exists in ${file}: revoke it first to issue a new one`);
        const token = newToken();
        const params = { file, scopes, ...(rate ? { rate: formatRateLimit(rate) } : {}) };
        await audited(o.raw("database"), "tokenCreate", name, params, () =>
          writeTokensFile(file, [
            ...entries,
            { name, hash: hashToken(token), scopes, ...(rate ? { rate } : {}) },
          ]),
        );
        print(
          json
            ? JSON.stringify({ name, token })
            : `token ${name} (${describe(scopes)}):\n${token}\n(shown once; ${file} keeps only its hash)`,
        );
        return 0;
      }
      case "list": {
        const entries = read();
        const rateOf = (e: { rate?: RateLimit | null }) => (e.rate ? formatRateLimit(e.rate) : null);
        if (json)
          print(JSON.stringify(entries.map((e) => ({ name: e.name, scopes: e.scopes, rate: rateOf(e) }))));
        else
          for (const e of entries)
            print(`${e.name}\t${describe(e.scopes)}${e.rate ? `\trate ${rateOf(e)}` : ""}`);
        return 0;
      }
      case "revoke": {
        if (!name) throw new UsageError("token revoke <name> --file FILE");
        const entries = read();
        if (!entries.some((e) => e.name === name)) {
          print(`token ${name} is not in ${file}`);
          return 1;
        }
        await audited(o.raw("database"), "tokenRevoke", name, { file }, () =>
          writeTokensFile(
            file,
            entries.filter((e) => e.name !== name),
          ),
        );
        print(
          json
            ? JSON.stringify({ name, revoked: true })
            : `revoked ${name}: its requests and sessions are refused once the API reads ${file}`,
        );
        return 0;
      }
      default:
        throw new UsageError(USAGE);
    }
  },
});
