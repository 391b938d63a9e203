// Unit tier: which settle writes are retried and which are given up (no Redis: ioredis' own reply type).
import assert from "node:assert/strict";
import { test } from "node:test";
import { ReplyError } from "ioredis";
import { pino } from "pino";
import { REFUSALS_UNREADY, SettleWrites, WriteRefusedError } from "./execution.ts";

const log = pino({ level: "silent" });
const reply = (message: string) => new (ReplyError as new (m: string) => Error)(message);

test("a transient failure is retried until the write goes through", async () => {
  const writes = new SettleWrites(() => assert.fail("counted a transient failure"));
  let tries = 0;
  const done = await writes.write(log, "complete", async () => {
    if (++tries < 3) throw reply("LOADING Redis is loading the dataset in memory");
    return "settled";
  });
  assert.equal(done, "settled");
  assert.equal(tries, 3);
});

test("a refusal gets one more try, then is counted and thrown; the worker is unready after enough in a row, ready after a write goes through", async () => {
  const counted: string[] = [];
  const writes = new SettleWrites((code) => counted.push(code));
  const refuse = async (attempt: number) => {
    throw reply(`OOM command not allowed (try ${attempt})`);
  };
  for (let i = 1; i <= REFUSALS_UNREADY; i++) {
    assert.equal(writes.unready(), undefined);
    await assert.rejects(writes.write(log, "complete", refuse), (err: unknown) => {
      assert.ok(err instanceof WriteRefusedError);
      assert.equal(err.code, "OOM");
      return true;
    });
  }
  assert.deepEqual(counted, Array(REFUSALS_UNREADY).fill("OOM"));
  assert.match(
    writes.unready() ?? "",
    /refused by Redis, the last: complete: OOM command not allowed \(try 2\)/,
  );
  // (a batched first try refused because of another job's record: the lone second try goes through)
  assert.equal(
    await writes.write(log, "complete", async (a) => (a === 1 ? refuse(a) : "settled")),
    "settled",
  );
  assert.equal(writes.unready(), undefined);
});
