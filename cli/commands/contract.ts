// `conveyor contract <action> …`: a stage's contract. `types` writes the types it gives
// (contractTypes.ts parses its own flags, so any action can sit beside it).
import { settingsHelp } from "../../lib/options.ts";
import { FOOTER, UsageError, type Command } from "../command.ts";
import { CONTRACT_TYPES_SETTINGS, CONTRACT_TYPES_USAGE, contractTypesCommand } from "./contractTypes.ts";

const command: Command = {
  args: ["types [<queue>]"],
  settings: async () => CONTRACT_TYPES_SETTINGS,
  help: async (synopsis) =>
    `usage: conveyor contract [options]\n\n${synopsis}\n\n${settingsHelp(CONTRACT_TYPES_SETTINGS)}\n\n${FOOTER}`,
  async run(argv) {
    if (argv[0] === "types") return contractTypesCommand(argv.slice(1));
    throw new UsageError(
      `contract: ${argv[0] === undefined ? "expected an action" : `unknown action ${JSON.stringify(argv[0])}`} (usage: conveyor ${CONTRACT_TYPES_USAGE})`,
    );
  },
};
export default command;
