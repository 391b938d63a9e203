// Completion notifications (docs/notifications.md) from real `conveyor worker` processes to a real
// HTTP receiver in this process: signatures, retries while the receiver is down, refused private
// destinations, jobs' own notify, and a worker killed with an entry in hand.
import assert from "node:assert/strict";
import { createHmac, timingSafeEqual } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { execFile } from "node:child_process";
import { cancelJob, Consumer, QueueKeys, readDeliveries, type Delivery } from "../../queue/index.ts";
import { expandEntry } from "../../worker/notify.ts";
import { pollUntil } from "../support/poll.ts";
import { stopProcess } from "../support/processes.ts";
import { startQueueRedis, stopQueueRedis, type QueueRedis } from "../support/redis.ts";
import {
  CONVEYOR,
  metricValue,
  NODE,
  RECORDING_HANDLER,
  startWorker,
  type WorkerProcess,
} from "../support/workers.ts";

const run = promisify(execFile);
const SECRET = "whsec_test_0123456789abcdef";

/** Stripe-style verification, as docs/notifications.md shows it. */
function verify(secret: string, header: string | undefined, body: string, toleranceS = 300): boolean {
  const parts = Object.fromEntries((header ?? "").split(",").map((p) => p.split("=", 2) as [string, string]));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || !parts.v1 || Math.abs(Date.now() / 1000 - t) > toleranceS) return false;
  const expected = createHmac("sha256", secret).update(`${t}.${body}`).digest();
  const got = Buffer.from(parts.v1, "hex");
  return got.length === expected.length && timingSafeEqual(got, expected);
}

interface Received {
  path: string;
  body: string;
  json: Record<string, unknown>;
  signature?: string;
  delivery?: string;
  status?: number;
}

/** A receiver on port 0: records every POST; `answer` decides the status (200 by default). */
class Receiver {
  received: Received[] = [];
  answer: (r: Received) => number | "hang" = () => 200;
  private server!: Server;
  port = 0;
  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        const r: Received = {
          path: req.url ?? "",
          body,
          json: JSON.parse(body) as Record<string, unknown>,
          signature: req.headers["conveyor-signature"] as string | undefined,
          delivery: req.headers["conveyor-delivery"] as string | undefined,
        };
        this.received.push(r);
        const a = this.answer(r);
        if (a === "hang") return;
        r.status = a;
        const location = a >= 300 && a < 400 ? { location: this.url("/elsewhere") } : {};
        res
          .writeHead(a, { "content-type": "text/plain", ...location })
          .end(a === 200 ? "ok" : "down for now");
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }
  url(path = "/hook"): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }
  ids(path?: string, state?: string): string[] {
    return this.received
      .filter(
        (r) => (path === undefined || r.path === path) && (state === undefined || r.json.state === state),
      )
      .map((r) => String(r.json.id));
  }
  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

describe("completion notifications", () => {
  let qr: QueueRedis;
  let dir: string;
  let secretFile: string;
  const workers: WorkerProcess[] = [];
  const receivers: Receiver[] = [];
  before(async () => {
    qr = await startQueueRedis();
    dir = mkdtempSync(join(tmpdir(), "cvy-notify-"));
    secretFile = join(dir, "secret");
    writeFileSync(secretFile, `${SECRET}\n`);
  });
  after(async () => {
    for (const w of workers) await stopProcess(w, 2000);
    for (const r of receivers) await r.stop();
    await stopQueueRedis(qr);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const receiver = async () => {
    const r = await new Receiver().start();
    receivers.push(r);
    return r;
  };
  const worker = async (name: string, queue: string, env: Record<string, string>) => {
    const w = await startWorker({
      dir,
      name,
      env: {
        REDIS_URL: qr.server.url,
        CONVEYOR_QUEUE: queue,
        CONVEYOR_HANDLER: RECORDING_HANDLER,
        CONVEYOR_CONCURRENCY: "8",
        CONVEYOR_NOTIFY_SECRET_FILE: secretFile,
        CONVEYOR_NOTIFY_TIMEOUT: "1s",
        CONVEYOR_NOTIFY_RETRY_BASE: "100ms",
        ...env,
      },
    });
    workers.push(w);
    return w;
  };
  const deliveries = (queue: string, id: string): Promise<Delivery[]> =>
    readDeliveries(qr.redis, queue.split("/")[0]!, id);

  test("completed, dead and cancelled jobs are POSTed signed; a wrong secret does not verify", async () => {
    const r = await receiver();
    const q = "nsig/s";
    await worker("nsig", q, { CONVEYOR_NOTIFY_URL: r.url(), CONVEYOR_NOTIFY_ALLOW: "127.0.0.1/32" });
    await qr.producer.enqueue(q, { result: { pages: 3 } }, { id: "ok1" });
    await qr.producer.enqueue(q, { failTimes: 5 }, { id: "dead1", attempts: 1 });
    await qr.producer.enqueue(q, {}, { id: "cx1", delayMs: 3_600_000 });
    await cancelJob(qr.redis, "cx1", { queueOrPipeline: q });
    await pollUntil("three notifications", () => r.received.length >= 3, { timeoutMs: 30_000 });
    const by = new Map(r.received.map((x) => [x.json.id, x]));
    for (const x of r.received) {
      assert.ok(verify(SECRET, x.signature, x.body), `signature of ${x.body}: ${x.signature}`);
      assert.equal(verify("another-secret-0123456789", x.signature, x.body), false);
      // (a changed body does not verify either)
      assert.equal(verify(SECRET, x.signature, x.body.replace("}", ', "x": 1}')), false);
    }
    const ok = by.get("ok1")!.json;
    assert.equal(ok.state, "completed");
    assert.deepEqual(ok.result, { pages: 3 });
    assert.equal(ok.queue, q);
    assert.equal(ok.pipeline, "nsig");
    assert.equal(ok.attempts, 1);
    assert.ok(Date.parse(String(ok.enqueuedAt)) <= Date.parse(String(ok.finishedAt)));
    const dead = by.get("dead1")!.json;
    assert.equal(dead.state, "dead");
    assert.match(JSON.stringify(dead.error), /planned failure 1/);
    assert.equal(by.get("cx1")!.json.state, "cancelled");
    await pollUntil("delivered recorded", async () => (await deliveries(q, "ok1"))[0]?.state === "delivered");
    const [d] = await deliveries(q, "ok1");
    assert.equal(d!.status, 200);
    assert.equal(d!.attempts, 1);
    // `conveyor job --json` shows it
    const env = { ...process.env, REDIS_URL: qr.server.url };
    const json = await run(NODE, [CONVEYOR, "job", "ok1", "--queue", q, "--json"], { env });
    const view = JSON.parse(json.stdout) as { notifications: Delivery[] };
    assert.equal(view.notifications[0]!.state, "delivered");
    const text = await run(NODE, [CONVEYOR, "job", "dead1", "--queue", q], { env });
    assert.match(
      text.stdout,
      /notifications:\n {2}dead → http:\/\/127\.0\.0\.1:\d+\/hook: delivered after 1 attempt\(s\)/,
    );
  });

  test("a receiver down for a while gets every event later, at least once; duplicates counted", async () => {
    const r = await receiver();
    let down = true;
    r.answer = () => (down ? 503 : 200);
    const q = "ndown/s";
    const w = await worker("ndown", q, {
      CONVEYOR_NOTIFY_URL: r.url(),
      CONVEYOR_NOTIFY_ALLOW: "127.0.0.0/8",
    });
    const n = 20;
    await qr.producer.enqueueMany(
      q,
      Array.from({ length: n }, (_, i) => ({ id: `d${i}`, data: i })),
    );
    await pollUntil(
      "every job tried at least twice",
      async () => {
        for (let i = 0; i < n; i++) if (((await deliveries(q, `d${i}`))[0]?.attempts ?? 0) < 2) return false;
        return true;
      },
      { timeoutMs: 60_000 },
    );
    assert.equal(r.ids(undefined).length >= 2 * n, true);
    down = false;
    await pollUntil(
      "every job delivered",
      async () => {
        for (let i = 0; i < n; i++)
          if ((await deliveries(q, `d${i}`))[0]?.state !== "delivered") return false;
        return true;
      },
      { timeoutMs: 60_000 },
    );
    const okIds = r.received.filter((x) => x.status === 200).map((x) => String(x.json.id));
    assert.equal(new Set(okIds).size, n);
    // At least once: a duplicate is a second 200 for the same entry (none expected from one live worker).
    const duplicates = okIds.length - new Set(okIds).size;
    console.log(
      `# receiver down then up: ${n} jobs, ${r.received.length} requests, ${duplicates} duplicates`,
    );
    assert.equal(duplicates, 0);
    const m = await w.metrics();
    assert.ok(metricValue(m, "conveyor_notify_deliveries_total", { outcome: "retried" }) >= 2 * n);
    assert.equal(metricValue(m, "conveyor_notify_deliveries_total", { outcome: "delivered" }), n);
    const [d] = await deliveries(q, "d0");
    assert.ok(d!.attempts >= 3, JSON.stringify(d));
  });

  test("a redirect is not followed; retries spent, the delivery is marked failed", async () => {
    const r = await receiver();
    r.answer = (x) => (x.path === "/hook" ? 302 : 200);
    const q = "nfail/s";
    const w = await worker("nfail", q, {
      CONVEYOR_NOTIFY_URL: r.url(),
      CONVEYOR_NOTIFY_ALLOW: "127.0.0.1/32",
      CONVEYOR_NOTIFY_RETRY_MAX: "500ms",
    });
    await qr.producer.enqueue(q, {}, { id: "f1" });
    const d = await pollUntil(
      "the delivery failed",
      async () => {
        const [x] = await deliveries(q, "f1");
        return x?.state === "failed" ? x : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.equal(d.status, 302);
    assert.match(d.answer, /redirect to http:\/\/127\.0\.0\.1:\d+\/elsewhere not followed/);
    assert.ok(d.attempts >= 1);
    assert.equal(r.ids("/elsewhere").length, 0, "the redirect was never followed");
    assert.equal(
      metricValue(await w.metrics(), "conveyor_notify_deliveries_total", { outcome: "failed" }),
      1,
    );
  });

  test("a loopback destination is refused, and the delivery names the address", async () => {
    const r = await receiver();
    const q = "nref/s";
    await worker("nref", q, { CONVEYOR_NOTIFY_URL: r.url() });
    await qr.producer.enqueue(q, {}, { id: "r1" });
    const d = await pollUntil("the delivery failed", async () => {
      const [x] = await deliveries(q, "r1");
      return x?.state === "failed" ? x : undefined;
    });
    assert.match(d.answer, /127\.0\.0\.1 is loopback, link-local or private/);
    assert.equal(d.attempts, 1);
    assert.equal(r.received.length, 0);
  });

  test("a job's own notify adds its URL and events to the pool's", async () => {
    const r = await receiver();
    const q = "nown/s";
    await worker("nown", q, {
      CONVEYOR_NOTIFY_URL: r.url("/pool"),
      CONVEYOR_NOTIFY_EVENTS: "completed",
      CONVEYOR_NOTIFY_ALLOW: "127.0.0.1/32",
    });
    await qr.producer.enqueue(q, {}, { id: "both", notify: { url: r.url("/job"), events: ["completed"] } });
    await qr.producer.enqueue(
      q,
      { failTimes: 9 },
      { id: "jobdead", attempts: 1, notify: { url: r.url("/job"), events: ["dead"] } },
    );
    await qr.producer.enqueue(q, { failTimes: 9 }, { id: "pooldead", attempts: 1 });
    await qr.producer.enqueue(q, {}, { id: "plain" });
    await pollUntil("four notifications", () => r.received.length >= 4, { timeoutMs: 30_000 });
    await pollUntil(
      "every job settled",
      async () => Number(await qr.redis.hget(new QueueKeys(q).counts, "dead")) === 2,
    );
    assert.deepEqual(r.ids("/pool").sort(), ["both", "plain"]);
    assert.deepEqual(r.ids("/job").sort(), ["both", "jobdead"]);
    assert.equal(r.ids(undefined, "dead").join(), "jobdead");
    // the pool does not notify dead: none for pooldead
    assert.equal(await qr.redis.exists(new QueueKeys(q).notified("pooldead")), 0);
    await assert.rejects(
      qr.producer.enqueue(q, {}, { notify: { url: "ftp://x", events: ["completed"] } }),
      /notify\.url must be an http:\/\/ or https:\/\/ URL/,
    );
    await assert.rejects(
      qr.producer.enqueue(q, {}, { notify: { url: r.url(), events: ["done" as "dead"] } }),
      /notify\.events must be a non-empty list of completed, dead, cancelled/,
    );
    await assert.rejects(
      qr.producer.enqueue(q, {}, { notify: { url: r.url(), events: ["dead"], secret: "x" } as never }),
      /notify takes url and events only/,
    );
  });

  test("the jobs one settle call completes are one notify entry; the sender expands it; others write none", async () => {
    const q = "nbatch/s";
    const k = new QueueKeys(q);
    await qr.redis.hset(k.meta, `notify:${q}`, "completed,dead");
    await qr.producer.enqueueMany(q, [
      { id: "b1", data: 1 },
      { id: "b2", data: 2, notify: { url: "https://hooks.example.com/b2", events: ["completed"] } },
      { id: "b3", data: 3 },
    ]);
    const consumer = new Consumer(qr.redis, q, { workerId: "t", leaseMs: 30_000, retentionSeconds: 60 });
    const { jobs } = await consumer.claim(3);
    await consumer.settleMany(
      jobs.map((job) => ({ job, settlement: { result: { v: JSON.parse(job.rawData) as number } } })),
      0,
    );
    const entries = (await qr.redis.xrange(k.notify, "-", "+")) as [string, string[]][];
    assert.equal(entries.length, 1);
    const [entryId, list] = entries[0]!;
    const e: Record<string, string> = {};
    for (let i = 0; i < list.length; i += 2) e[list[i]!] = list[i + 1]!;
    assert.equal(e.n, "3");
    const jobsOut = expandEntry(entryId, e);
    assert.deepEqual(
      jobsOut.map(([d, j]) => [d, j.id, j.state, j.pool, j.url, JSON.parse(j.result!)]),
      [
        [`${entryId}/0`, "b1", "completed", "1", undefined, { v: 1 }],
        [`${entryId}/1`, "b2", "completed", "1", "https://hooks.example.com/b2", { v: 2 }],
        [`${entryId}/2`, "b3", "completed", "1", undefined, { v: 3 }],
      ],
    );
    // A queue whose pool and jobs ask for nothing: no entry, and no command beyond the settle's.
    const plain = "nbatch/plain";
    await qr.producer.enqueueMany(plain, [{ data: 1 }, { data: 2 }]);
    const c2 = new Consumer(qr.redis, plain, { workerId: "t", leaseMs: 30_000, retentionSeconds: 60 });
    const claimed = (await c2.claim(2)).jobs;
    await c2.settleMany(
      claimed.map((job) => ({ job, settlement: { result: null } })),
      0,
    );
    assert.equal(await qr.redis.xlen(k.notify), 1);
  });

  test("a job dead-lettered by the sweeper (stalled) is notified from the sweep's script", async () => {
    const q = "nstall/s";
    const k = new QueueKeys(q);
    await qr.producer.enqueue(
      q,
      {},
      { id: "st1", notify: { url: "https://hooks.example.com/st", events: ["dead"] } },
    );
    const consumer = new Consumer(qr.redis, q, { workerId: "t", leaseMs: 50, retentionSeconds: 60 });
    await consumer.claim(1);
    await pollUntil("the sweeper dead-letters it", async () => {
      await consumer.sweep({ maxStalls: 0, lockMs: 1, gapMs: 600_000, graceMs: 0 });
      return (await qr.redis.hget(k.job("st1"), "state")) === "dead";
    });
    const entries = (await qr.redis.xrange(k.notify, "-", "+")) as [string, string[]][];
    const e = Object.fromEntries(
      entries.map(([, l]) => l).flatMap((l) => l.flatMap((v, i) => (i % 2 ? [] : [[v, l[i + 1]!]]))),
    );
    assert.equal(e.id, "st1");
    assert.equal(e.state, "dead");
    assert.equal(e.url, "https://hooks.example.com/st");
    assert.equal(e.pool, "0");
    assert.match(JSON.parse(e.error!).message, /stalled 1 times/);
  });

  test("a worker SIGKILLed with a notification in hand: another worker delivers it", async () => {
    const r = await receiver();
    let hang = true;
    r.answer = () => (hang ? "hang" : 200);
    const q = "nkill/s";
    const env = {
      CONVEYOR_NOTIFY_URL: r.url(),
      CONVEYOR_NOTIFY_ALLOW: "127.0.0.1/32",
      CONVEYOR_NOTIFY_TIMEOUT: "5s",
    };
    const a = await worker("nkill-a", q, env);
    await qr.producer.enqueue(q, {}, { id: "k1" });
    await pollUntil("worker a is sending", () => r.received.length >= 1, { timeoutMs: 30_000 });
    a.signal("SIGKILL");
    await a.exited;
    hang = false;
    assert.equal((await deliveries(q, "k1")).length, 0, "a recorded nothing: it died in the send");
    await worker("nkill-b", q, env);
    const d = await pollUntil(
      "b delivered it",
      async () => {
        const [x] = await deliveries(q, "k1");
        return x?.state === "delivered" ? x : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.equal(d.status, 200);
    assert.ok(r.ids(undefined, "completed").filter((id) => id === "k1").length >= 2);
  });
});
