// `conveyor scripts dump <dir>` / `show <name>`: the resolved script text clients in other languages load.
import { dumpScripts, scriptSource, SCRIPT_NAMES, type ScriptName } from "../../queue/index.ts";
import { COMMON, defineCommand, print, UsageError } from "../command.ts";

export default defineCommand({
  name: "scripts",
  synopsis:
    "  scripts dump <dir> | show <name>        the published Lua scripts, includes resolved, and library.lua (for other languages)",
  settings: COMMON,
  async run(o) {
    const [action, target] = o.positionals;
    if (action === "dump" && target && o.positionals.length === 2) {
      for (const path of dumpScripts(target)) print(path);
      return;
    }
    if (action === "show" && target && o.positionals.length === 2) {
      if (!(SCRIPT_NAMES as readonly string[]).includes(target))
        throw new UsageError(`unknown script ${JSON.stringify(target)}; one of: ${SCRIPT_NAMES.join(", ")}`);
      process.stdout.write(scriptSource(target as ScriptName));
      return;
    }
    throw new UsageError("scripts: expected `dump <dir>` or `show <name>`");
  },
});
