// `conveyor contract`: a queue's contract (JSON Schemas of its jobs' data and results, per task)
// for queues without a WorkerPool to publish one — set, get, delete — and `types`, the types it
// gives (contractTypes.ts parses its own flags).
import { auditedCli, pipelineOfQueue } from "../audit.ts";
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import type { Contract } from "../../queue/contracts.ts";
import { settingsHelp } from "../../lib/options.ts";
import {
  type Command,
  FOOTER,
  assertQueueNameForUsage,
  COMMON,
  defineCommand,
  print,
  UsageError,
  when,
  withRedis,
} from "../command.ts";
import { CONTRACT_TYPES_SETTINGS, CONTRACT_TYPES_USAGE, contractTypesCommand } from "./contractTypes.ts";

const contracts = () => import("../../queue/contracts.ts");

const USAGE =
  "contract set <queue> (--file CONTRACT.json|yaml | [--data SCHEMA] [--result SCHEMA]) | get <queue> [--json] | delete <queue>";

const setGetDelete = defineCommand({
  name: "contract",
  args: ["set|get|delete <queue>"],
  settings: {
    ...COMMON,
    file: {
      kind: "string",
      arg: "FILE",
      help: "the whole contract, JSON or YAML: {data, result, tasks: {<name>: {data, result}}}",
    },
    data: { kind: "string", arg: "FILE", help: "the JSON Schema (JSON or YAML) of the jobs' data" },
    result: { kind: "string", arg: "FILE", help: "the JSON Schema (JSON or YAML) of the jobs' results" },
  },
  async run(o) {
    const [action, queue] = o.positionals;
    if (!action || !queue) throw new UsageError(USAGE);
    assertQueueNameForUsage(queue);
    const asJson = o.bool("json");
    const { setContract, getContract, deleteContract, compileContract } = await contracts();
    if (action === "set") {
      const contract = contractFromFlags(o.raw("file"), o.raw("data"), o.raw("result"));
      compileContract(contract); // a bad schema named before connecting
      return withRedis(o.str("redis")!, async (redis) => {
        const stored = await auditedCli(
          redis,
          {
            pipeline: pipelineOfQueue(queue),
            verb: "admin",
            operation: "putContract",
            target: queue,
            params: {},
          },
          () => setContract(redis, queue, contract, "cli"),
          (stored) => ({ result: { hash: stored.hash } }),
        );
        print(asJson ? JSON.stringify({ queue, hash: stored.hash }) : `${queue} contract ${stored.hash}`);
        return 0;
      });
    }
    if (o.raw("file") !== undefined || o.raw("data") !== undefined || o.raw("result") !== undefined)
      throw new UsageError(`contract ${action} takes no --file, --data or --result (${USAGE})`);
    return withRedis(o.str("redis")!, async (redis) => {
      if (action === "delete") {
        const had = await auditedCli(
          redis,
          {
            pipeline: pipelineOfQueue(queue),
            verb: "admin",
            operation: "deleteContract",
            target: queue,
            params: {},
          },
          () => deleteContract(redis, queue),
          (had) => ({ result: { deleted: had } }),
        );
        print(
          asJson
            ? JSON.stringify({ queue, deleted: had })
            : `${queue} ${had ? "contract deleted" : "has no contract"}`,
        );
        return had ? 0 : 1;
      }
      const stored = await getContract(redis, queue);
      if (!stored) {
        print(asJson ? JSON.stringify({ queue, contract: null }) : `${queue} has no contract`);
        return 1;
      }
      print(
        asJson
          ? JSON.stringify({ queue, ...stored })
          : `${queue} contract ${stored.hash} from ${stored.source || "?"} at ${when(stored.updatedAt)}\n${JSON.stringify(stored.contract, null, 2)}`,
      );
      return 0;
    });
  },
});

const command: Command = {
  args: [...setGetDelete.args, "types [<queue>]"],
  settings: async () => ({
    ...(await setGetDelete.settings()),
    ...CONTRACT_TYPES_SETTINGS,
    file: {
      ...CONTRACT_TYPES_SETTINGS.file,
      help: "the whole contract, JSON or YAML ({data, result, tasks: {<name>: {data, result}}}): set stores it, types reads it instead of a queue",
    },
  }),
  help: async (synopsis) =>
    `usage: conveyor ${USAGE} | ${CONTRACT_TYPES_USAGE}\n\n${synopsis}\n\n` +
    `set, get, delete:\n${settingsHelp(await setGetDelete.settings())}\n\n` +
    `types:\n${settingsHelp(CONTRACT_TYPES_SETTINGS)}\n\n${FOOTER}`,
  run: (argv) => (argv[0] === "types" ? contractTypesCommand(argv.slice(1)) : setGetDelete.run(argv)),
};
export default command;

/** The contract the flags name: --file alone, or --data and/or --result. */
function contractFromFlags(
  file: string | undefined,
  data: string | undefined,
  result: string | undefined,
): Contract {
  if (file !== undefined) {
    if (data !== undefined || result !== undefined)
      throw new UsageError("contract set takes --file, or --data and/or --result, not both");
    return readDocument(file, "--file") as Contract;
  }
  if (data === undefined && result === undefined)
    throw new UsageError(`contract set needs --file, or --data and/or --result (${USAGE})`);
  const contract: Contract = {};
  if (data !== undefined) contract.data = readDocument(data, "--data") as Contract["data"];
  if (result !== undefined) contract.result = readDocument(result, "--result") as Contract["result"];
  return contract;
}

/** A JSON or YAML file (by its extension; JSON is YAML too, so any other name is read as YAML). */
function readDocument(file: string, flag: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new UsageError(`${flag} ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    return /\.json$/i.test(file) ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new UsageError(
      `${flag} ${file} is not valid ${/\.json$/i.test(file) ? "JSON" : "YAML"}: ${(err as Error).message}`,
    );
  }
}
