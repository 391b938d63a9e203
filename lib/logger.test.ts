import { strict as assert } from "node:assert";
import { execFileSync } from "node:child_process";
import { it } from "node:test";

it("a line's fields do not leak into the lines after it (pino's mixin merge)", () => {
  const script = `
    import { createLogger } from ${JSON.stringify(new URL("./logger.ts", import.meta.url).href)};
    const log = createLogger("info", { component: "t" });
    log.info({ a: 1 }, "first");
    log.info("second");`;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
  const [first, second] = out
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.equal(first!.a, 1);
  assert.equal(second!.msg, "second");
  assert.equal(second!.a, undefined);
  assert.equal(second!.component, "t");
});
