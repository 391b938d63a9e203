// `conveyor operator`: the WorkerPool operator (its settings: operator/config.ts). The worker
// image leaves the operator out, hence importOperatorPart.
import { importOperatorPart, type Command } from "../command.ts";

const config = () => importOperatorPart<typeof import("../../operator/config.ts")>("../operator/config.ts");

export default {
  args: [],
  settings: async () => (await config()).OPERATOR_SETTINGS,
  help: async () => (await config()).OPERATOR_USAGE,
  run: async (argv) =>
    (await importOperatorPart<typeof import("../../operator/main.ts")>("../operator/main.ts")).runOperator(
      argv,
    ),
} satisfies Command;
