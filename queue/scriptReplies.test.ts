// Unit tier: which Redis error replies a write may retry (no Redis needed: ioredis' own reply type).
import assert from "node:assert/strict";
import { test } from "node:test";
import { ReplyError } from "ioredis";
import { permanentReplyCode } from "./scriptReplies.ts";

const reply = (message: string) => new (ReplyError as new (m: string) => Error)(message);

test("refusals that retrying cannot get past are permanent, by their code", () => {
  for (const [message, code] of [
    [
      "WRONGTYPE Operation against a key holding the wrong kind of value script: cvy_settle_jobs",
      "WRONGTYPE",
    ],
    ["OOM command not allowed when used memory > 'maxmemory'.", "OOM"],
    ["NOPERM User w has no permissions to access one of the keys used as arguments", "NOPERM"],
    ["NOAUTH Authentication required.", "NOAUTH"],
    ["ERR user_function:390: too many results to unpack script: cvy_claim_jobs", "ERR"],
  ])
    assert.equal(permanentReplyCode(reply(message!)), code, message);
});

test("a server loading, busy or failing over, a lost script and no reply at all are transient", () => {
  for (const message of [
    "LOADING Redis is loading the dataset in memory",
    "BUSY Redis is busy running a script.",
    "READONLY You can't write against a read only replica.",
    "TRYAGAIN Multiple keys request during rehashing of slot",
    "CLUSTERDOWN The cluster is down",
    "MASTERDOWN Link with MASTER is down",
    "NOREPLICAS Not enough good replicas to write.",
    "NOSCRIPT No matching script.",
  ])
    assert.equal(permanentReplyCode(reply(message)), undefined, message);
  assert.equal(permanentReplyCode(new Error("Connection is closed.")), undefined);
  assert.equal(permanentReplyCode(new Error("ERR looks like a reply but is not one")), undefined);
  assert.equal(permanentReplyCode("OOM"), undefined);
});
