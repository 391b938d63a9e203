// `conveyor worker`: the generic worker (its settings: worker/config.ts).
import type { Command } from "../command.ts";

// Loaded on use, and named at the top level: tsc (5.9, ESM) leaves a `.ts` import() inside an
// object literal unrewritten, and the compiled CLI would look for a .ts file dist/ does not have.
const config = () => import("../../worker/config.ts");
const main = () => import("../../worker/main.ts");

export default {
  args: [],
  settings: async () => (await config()).WORKER_SETTINGS,
  help: async () => (await config()).WORKER_USAGE,
  run: async (argv) => (await main()).runWorker(argv),
} satisfies Command;
