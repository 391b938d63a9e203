// `conveyor worker`: the generic worker (its settings: worker/config.ts).
import type { Command } from "../command.ts";

const config = () => import("../../worker/config.ts");

export default {
  name: "worker",
  synopsis: "  worker [options]                        run the generic worker (conveyor worker --help)",
  settings: async () => (await config()).WORKER_SETTINGS,
  help: async () => (await config()).WORKER_USAGE,
  run: async (argv) => (await import("../../worker/main.ts")).runWorker(argv),
} satisfies Command;
