// `conveyor contract set|get|delete` and contracts at `conveyor enqueue`, as a user runs them,
// against a real Redis: a refusal names each job's pointer, rule and value and exits 1.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connectRedis, getContract, QueueKeys, type RedisClient } from "../../queue/index.ts";
import { RedisServer } from "../support/redis.ts";
import { CONVEYOR, NODE } from "../support/workers.ts";

describe("conveyor contract and enqueue under a contract", () => {
  let server: RedisServer;
  let redis: RedisClient;
  let dir: string;
  before(async () => {
    server = await RedisServer.start();
    redis = connectRedis(server.url);
    dir = mkdtempSync(join(tmpdir(), "cvy-contract-"));
  });
  after(async () => {
    redis.disconnect();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const run = (...args: string[]) =>
    spawnSync(NODE, [CONVEYOR, ...args], {
      env: { ...process.env, REDIS_URL: server.url },
      encoding: "utf8",
    });
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  test("set from a YAML contract with tasks, get it back, enqueue --task against it, delete it", async () => {
    const contract = file(
      "contract.yaml",
      [
        "tasks:",
        "  summarize:",
        "    data:",
        "      type: object",
        "      required: [text]",
        "      properties:",
        "        text: {type: string, minLength: 1}",
        "",
      ].join("\n"),
    );
    const set = run("contract", "set", "docs", "--file", contract);
    assert.equal(set.status, 0, set.stderr);
    const stored = await getContract(redis, "docs");
    assert.equal(set.stdout.trim(), `docs contract ${stored!.hash}`);
    assert.equal(stored!.source, "cli");
    const got = run("contract", "get", "docs", "--json");
    assert.equal(got.status, 0, got.stderr);
    assert.deepEqual(JSON.parse(got.stdout).contract, stored!.contract);

    const ok = run("enqueue", "docs", '{"text":"hello"}', "--task", "summarize", "--id", "d1");
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(await redis.hget(new QueueKeys("docs").job("d1"), "task"), "summarize");

    const bad = run("enqueue", "docs", '{"text":""}', "--task", "summarize");
    assert.equal(bad.status, 1);
    assert.match(
      bad.stderr,
      /nothing enqueued\n {2}the job task summarize data: \/text: .* \(minLength, value ""\)/,
    );
    const unknown = run("enqueue", "docs", '{"text":"x"}', "--task", "translate");
    assert.equal(unknown.status, 1);
    assert.match(unknown.stderr, /unknown task 'translate' \(the stage's tasks: summarize\)/);
    const badName = run("enqueue", "docs", '{"text":"x"}', "--task", "no spaces");
    assert.equal(badName.status, 1);
    assert.match(badName.stderr, /task must be 1\.\.100 characters/);

    const del = run("contract", "delete", "docs");
    assert.equal(del.status, 0, del.stderr);
    assert.equal(run("contract", "get", "docs").status, 1);
    assert.equal(run("contract", "delete", "docs").status, 1);
    assert.equal(run("enqueue", "docs", '{"text":""}', "--task", "summarize").status, 0);
  });

  test("enqueue --file refuses the whole file, naming each bad line's pointer; nothing is written", async () => {
    const data = file(
      "person.json",
      JSON.stringify({ type: "object", required: ["email"], properties: { email: { format: "email" } } }),
    );
    assert.equal(run("contract", "set", "people", "--data", data).status, 0);
    const jobs = file(
      "jobs.ndjson",
      '{"email":"a@example.com"}\n\n{"name":"b"}\n{"data":{"email":"nope"},"id":"c"}\n',
    );
    const r = run("enqueue", "people", "--file", jobs);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /people: 2 job\(s\) break the queue's contract/);
    assert.match(r.stderr, /line 3 data: \/email: is required \(required\)/);
    assert.match(
      r.stderr,
      /line 4 \(id c\) data: \/email: must match format "email" \(format, value "nope"\)/,
    );
    assert.equal(await redis.hget(new QueueKeys("people").counts, "enqueued"), null);
    const asJson = run("enqueue", "people", "--file", jobs, "--json");
    assert.equal(asJson.status, 1);
    assert.deepEqual(
      JSON.parse(asJson.stdout).jobs.map((j: { index: number; violations: { pointer: string }[] }) => [
        j.index,
        j.violations[0]!.pointer,
      ]),
      [
        [1, "/email"],
        [2, "/email"],
      ],
    );
  });

  test("bad contracts and flags are refused with the problem named, before anything is stored", async () => {
    const notSchema = file("bad.json", JSON.stringify({ data: { type: "nonsense" } }));
    const r = run("contract", "set", "q1", "--file", notSchema);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /data: not a valid JSON Schema/);
    const unknownMember = file("member.json", JSON.stringify({ datta: {} }));
    assert.match(
      run("contract", "set", "q1", "--file", unknownMember).stderr,
      /unknown contract member 'datta'/,
    );
    const broken = file("broken.json", "{");
    assert.match(run("contract", "set", "q1", "--file", broken).stderr, /is not valid JSON/);
    assert.equal(run("contract", "set", "q1").status, 2);
    assert.equal(run("contract", "set", "q1", "--file", notSchema, "--data", notSchema).status, 2);
    assert.equal(run("contract", "get", "q1", "--data", notSchema).status, 2);
    assert.match(run("contract", "set", "q1", "--data", join(dir, "missing.json")).stderr, /ENOENT/);
    assert.equal(await redis.exists(new QueueKeys("q1").contract), 0);
  });
});
