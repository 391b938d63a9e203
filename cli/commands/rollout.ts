// `conveyor rollout status|promote|abort <pool>`: a WorkerPool's canary rollout (docs/rollouts.md).
import { defineCommand, importOperatorPart, print, UsageError } from "../command.ts";
import { str } from "../../lib/options.ts";
import { JSON_SETTING } from "../../lib/settings.ts";

const rollout = () =>
  importOperatorPart<typeof import("../../operator/rollout/cli.ts")>("../operator/rollout/cli.ts");

const ACTIONS = ["status", "promote", "abort"] as const;

export default defineCommand({
  name: "rollout",
  args: ["status|promote|abort <pool>"],
  settings: {
    kubeconfig: str(
      "CONVEYOR_KUBECONFIG",
      { arg: "FILE" },
      "kubeconfig file (default: KUBECONFIG, else ~/.kube/config)",
    ),
    namespace: str("CONVEYOR_NAMESPACE", { arg: "NS", default: "default" }, "the WorkerPool's namespace"),
    json: JSON_SETTING,
  },
  async run(o) {
    const [action, name] = o.positionals;
    if (!action || !name || !(ACTIONS as readonly string[]).includes(action))
      throw new UsageError("rollout status|promote|abort <pool>");
    const { rolloutCommand, RolloutCommandError } = await rollout();
    try {
      print(
        await rolloutCommand(action as (typeof ACTIONS)[number], name, {
          kubeconfig: o.raw("kubeconfig"),
          namespace: o.str("namespace")!,
          json: o.bool("json"),
        }),
      );
    } catch (err) {
      if (err instanceof RolloutCommandError) {
        process.stderr.write(`conveyor rollout: ${err.message}\n`);
        return 1;
      }
      throw err;
    }
  },
});
