// A pod scaled down while its worker is still starting (here: a handler module whose top-level
// await has not finished) must stop cleanly with exit 0, the code the kubelet reports — not die by
// Node's default SIGTERM action (exit 143) — and must claim nothing it could not finish.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { connectRedis, Producer, QueueAdmin, type RedisClient } from "../../queue/index.ts";
import { waitFor } from "../support/processes.ts";
import { RedisServer } from "../support/redis.ts";
import { startWorker } from "../support/workers.ts";

let redis: RedisServer;
let client: RedisClient;
const dir = mkdtempSync(join(tmpdir(), "conveyor-startup-signal-"));

before(async () => {
  redis = await RedisServer.start();
  client = connectRedis(redis.url);
});
after(async () => {
  client.disconnect();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("SIGTERM while the handler module still loads: exit 0, nothing claimed", async () => {
  const loading = join(dir, "loading");
  const go = join(dir, "go");
  const handler = join(dir, "slowStart.mjs");
  // The module's top-level await holds the worker in its start-up until the test says go.
  writeFileSync(
    handler,
    `import { existsSync, writeFileSync } from "node:fs";
writeFileSync(${JSON.stringify(loading)}, "");
while (!existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 20));
export default async () => ({ ok: true });
`,
  );
  const queue = "startup-signal";
  await new Producer(client).enqueue(queue, { n: 1 });
  const w = await startWorker({
    dir,
    name: "starting",
    waitReady: false,
    env: { REDIS_URL: redis.url, CONVEYOR_QUEUE: queue, CONVEYOR_HANDLER: `module:${handler}` },
  });
  await waitFor("the handler module is loading", async () => existsSync(loading), 30_000, 20);
  w.signal("SIGTERM");
  await waitFor("the worker noted the stop request", async () =>
    /stop requested while starting/.test(w.logs()),
  );
  writeFileSync(go, "");
  const code = await w.exited;
  assert.equal(code, 0, `exit ${code}; log:\n${w.logs()}`);
  assert.match(w.logs(), /worker stopped/);
  const counts = await new QueueAdmin(client).counts(queue);
  assert.equal(counts.ready, 1, "the waiting job was not claimed");
  assert.equal(counts.inflight, 0);
});

test("SIGTERM while the worker's own modules load (before its handlers exist): exit 0, nothing claimed", async () => {
  const loading = join(dir, "main-loading");
  const go = join(dir, "main-go");
  // A module hook (node:module register) holds the load of worker/main.ts until the test says go:
  // the signal lands after bin/conveyor.js started and before worker/main.ts installed anything.
  const hooks = join(dir, "holdMainHooks.mjs");
  writeFileSync(
    hooks,
    `import { existsSync, writeFileSync } from "node:fs";
export async function load(url, context, next) {
  if (/\\/worker\\/main\\.(ts|js)$/.test(url)) {
    writeFileSync(${JSON.stringify(loading)}, "");
    while (!existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 20));
  }
  return next(url, context);
}
`,
  );
  const preload = join(dir, "holdMain.mjs");
  writeFileSync(
    preload,
    `import { register } from "node:module";\nregister(${JSON.stringify(`file://${hooks}`)});\n`,
  );
  const queue = "startup-signal-early";
  await new Producer(client).enqueue(queue, { n: 1 });
  const w = await startWorker({
    dir,
    name: "loading",
    waitReady: false,
    env: {
      REDIS_URL: redis.url,
      CONVEYOR_QUEUE: queue,
      CONVEYOR_HANDLER: 'command:["true"]',
      NODE_OPTIONS: `--import ${preload}`,
    },
  });
  await waitFor("worker/main.ts is loading", async () => existsSync(loading), 30_000, 20);
  // (sent before go: the kernel has it pending while the main thread waits for the hook; without
  // a listener from bin/conveyor.js its default action kills the process, exit 143)
  w.signal("SIGTERM");
  writeFileSync(go, "");
  const code = await w.exited;
  assert.equal(code, 0, `exit ${code}; log:\n${w.logs()}`);
  assert.match(w.logs(), /worker stopped/);
  const counts = await new QueueAdmin(client).counts(queue);
  assert.equal(counts.ready, 1, "the waiting job was not claimed");
});
