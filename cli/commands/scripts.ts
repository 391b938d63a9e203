// `conveyor scripts dump <dir>` / `show <name>`: the resolved script text clients in other languages load.
import { dumpScripts, scriptSource, SCRIPT_NAMES, type ScriptName } from "../../queue/index.ts";
import { COMMON, defineCommand, print, UsageError } from "../command.ts";

export default defineCommand({
  name: "scripts",
  args: ["dump <dir>", "show <name>"],
  settings: COMMON,
  async run(o) {
    const [action, target] = o.positionals;
    if (action === "dump" && target) {
      for (const path of dumpScripts(target)) print(path);
      return;
    }
    if (action === "show" && target) {
      if (!(SCRIPT_NAMES as readonly string[]).includes(target))
        throw new UsageError(`unknown script ${JSON.stringify(target)}; one of: ${SCRIPT_NAMES.join(", ")}`);
      process.stdout.write(scriptSource(target as ScriptName));
      return;
    }
    throw new UsageError("scripts: expected `dump <dir>` or `show <name>`");
  },
});
