// The `conveyor` command: one binary for producers, operators of the system, the worker image
// and the operator image. Each command is a file in commands/, loaded only when it runs (the
// table in commands/index.ts names them); this picks one and maps errors to exit status (2
// usage, 1 anything else).
import { OptionError } from "../lib/options.ts";
import { packageVersion } from "../lib/packageVersion.ts";
import { FOOTER, print, UsageError } from "./command.ts";
import { COMMANDS } from "./commands/index.ts";

export { UsageError };

export const USAGE = `usage: conveyor <command> [options]\n\n${COMMANDS.map((c) => c.synopsis).join("\n")}\n\n${FOOTER}`;

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  const entry = COMMANDS.find((c) => c.name === name);
  try {
    if (name === "--version" || name === "-V") {
      print(packageVersion());
      return 0;
    }
    if (name === undefined || name === "help" || name === "--help" || name === "-h") {
      print(USAGE);
      return name === undefined ? 2 : 0;
    }
    if (!entry) throw new UsageError(`unknown command ${JSON.stringify(name)}`);
    const command = await entry.load();
    if (rest.includes("--help") || rest.includes("-h")) {
      print(await command.help(entry.synopsis));
      return 0;
    }
    return await command.run(rest);
  } catch (err) {
    if (err instanceof UsageError || err instanceof OptionError) {
      process.stderr.write(`conveyor: ${err.message}\n\n${USAGE}\n`);
      return 2;
    }
    process.stderr.write(`conveyor: ${(err as Error).message}\n`);
    return 1;
  }
}
