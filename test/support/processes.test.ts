// A test process that is SIGKILLed (a runner's timeout, `kill -9`) leaves no server behind: the
// children startProcess started die with it (parent-death signal), Redis here as the example.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { Redis } from "ioredis";
import { pollUntil } from "./poll.ts";
import { NODE } from "./workers.ts";

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test("servers a SIGKILLed test process started die with it", async () => {
  const script = `
    import { RedisServer } from ${JSON.stringify(new URL("./redis.ts", import.meta.url).href)};
    const r = await RedisServer.start();
    console.log(r.url);
    setInterval(() => {}, 1000);
  `;
  const parent = spawn(NODE, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  const [line] = (await once(createInterface({ input: parent.stdout! }), "line")) as [string];
  const redis = new Redis(line, { lazyConnect: true, maxRetriesPerRequest: 0 });
  const info = await redis.info("server").finally(() => redis.disconnect());
  const redisPid = Number(/process_id:(\d+)/.exec(info)?.[1]);
  assert.ok(redisPid > 0 && alive(redisPid), `redis-server at ${line} runs (pid ${redisPid})`);
  parent.kill("SIGKILL");
  await once(parent, "exit");
  await pollUntil("redis-server gone after its parent was SIGKILLed", async () => !alive(redisPid), {
    timeoutMs: 30_000,
  });
});
