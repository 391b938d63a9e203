import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadWorkerConfig, WORKER_USAGE } from "./config.ts";

const BASE = ["--queue", "q", "--handler", "http://127.0.0.1:8080/run"];

describe("worker configuration", () => {
  it("every duration flag and variable takes 250ms/30s/5m/1h; a bare number stays seconds", () => {
    const c = loadWorkerConfig(
      [...BASE, "--drain", "2m", "--job-timeout", "90s", "--retention", "1h", "--lease", "10s"],
      {},
    );
    assert.equal(c.drainMs, 120_000);
    assert.equal(c.jobTimeoutMs, 90_000);
    assert.equal(c.retentionSeconds, 3600);
    assert.equal(c.leaseMs, 10_000);
    const e = loadWorkerConfig(BASE, {
      CONVEYOR_DRAIN: "25",
      CONVEYOR_JOB_TIMEOUT: "5m",
      CONVEYOR_RETENTION: "0",
      CONVEYOR_RESULT_TTL: "24h",
    });
    assert.equal(e.drainMs, 25_000);
    assert.equal(e.jobTimeoutMs, 300_000);
    assert.equal(e.retentionSeconds, 0);
    assert.equal(e.resultTtlSeconds, 86_400);
  });

  it("the former *_SECONDS names still work for one release, and a bad value names the one used", () => {
    const old = loadWorkerConfig(BASE, {
      CONVEYOR_DRAIN_SECONDS: "25",
      CONVEYOR_JOB_TIMEOUT_SECONDS: "5m",
      CONVEYOR_RETENTION_SECONDS: "0",
      CONVEYOR_RESULT_TTL_SECONDS: "24h",
    });
    assert.deepEqual(
      [old.drainMs, old.jobTimeoutMs, old.retentionSeconds, old.resultTtlSeconds],
      [25_000, 300_000, 0, 86_400],
    );
    assert.throws(
      () => loadWorkerConfig(BASE, { CONVEYOR_DRAIN_SECONDS: "soon" }),
      /--drain \/ CONVEYOR_DRAIN_SECONDS/,
    );
  });

  it("bad durations name the flag and its variable", () => {
    assert.throws(() => loadWorkerConfig([...BASE, "--drain", "soon"], {}), /--drain \/ CONVEYOR_DRAIN\b/);
    assert.throws(
      () => loadWorkerConfig([...BASE, "--lease", "50ms"], {}),
      /--lease \/ CONVEYOR_LEASE: expected at least 100ms, got 50ms/,
    );
  });

  it("--handler-credentials is off unless asked for, bare or by its variable; a bad value names both", () => {
    assert.equal(loadWorkerConfig(BASE, {}).handlerCredentials, false);
    assert.equal(loadWorkerConfig([...BASE, "--handler-credentials"], {}).handlerCredentials, true);
    assert.equal(loadWorkerConfig(BASE, { CONVEYOR_HANDLER_CREDENTIALS: "true" }).handlerCredentials, true);
    assert.throws(
      () => loadWorkerConfig(BASE, { CONVEYOR_HANDLER_CREDENTIALS: "maybe" }),
      /--handler-credentials \/ CONVEYOR_HANDLER_CREDENTIALS: expected true or false/,
    );
  });

  it("the outbox's byte budget: 256 MiB by default, at least 1 MiB, a bad value names its variable", () => {
    assert.equal(loadWorkerConfig(BASE, {}).outboxMaxBytes, 256 * 1024 * 1024);
    assert.equal(loadWorkerConfig(BASE, { CONVEYOR_OUTBOX_MAX_BYTES: "16777216" }).outboxMaxBytes, 16 << 20);
    assert.throws(
      () => loadWorkerConfig(BASE, { CONVEYOR_OUTBOX_MAX_BYTES: "1000" }),
      /--outbox-max-bytes \/ CONVEYOR_OUTBOX_MAX_BYTES/,
    );
    assert.throws(
      () => loadWorkerConfig([...BASE, "--outbox-max-bytes", "lots"], {}),
      /--outbox-max-bytes \/ CONVEYOR_OUTBOX_MAX_BYTES/,
    );
  });

  it("batches: --batch-size/--batch-min/--batch-wait (or their variables); bad combinations named", () => {
    assert.equal(loadWorkerConfig(BASE, {}).batch, undefined);
    assert.deepEqual(
      loadWorkerConfig([...BASE, "--batch-size", "50", "--batch-min", "10", "--batch-wait", "200ms"], {})
        .batch,
      { size: 50, minSize: 10, waitMs: 200 },
    );
    // (as the operator writes spec.batch: operator/controllers/deployment.ts)
    assert.deepEqual(
      loadWorkerConfig(BASE, {
        CONVEYOR_BATCH_SIZE: "50",
        CONVEYOR_BATCH_MIN: "10",
        CONVEYOR_BATCH_WAIT: "200ms",
      }).batch,
      { size: 50, minSize: 10, waitMs: 200 },
    );
    assert.deepEqual(loadWorkerConfig(BASE, { CONVEYOR_BATCH_SIZE: "8" }).batch, {
      size: 8,
      minSize: 1,
      waitMs: 0,
    });
    assert.throws(
      () => loadWorkerConfig([...BASE, "--batch-size", "0"], {}),
      /--batch-size expects a whole number 1\.\.10000, got "0"/,
    );
    assert.throws(
      () => loadWorkerConfig([...BASE, "--batch-size", "5", "--batch-min", "6"], {}),
      /--batch-min \/ CONVEYOR_BATCH_MIN 6 is more than --batch-size \/ CONVEYOR_BATCH_SIZE 5/,
    );
    assert.throws(
      () => loadWorkerConfig([...BASE, "--batch-wait", "1s"], {}),
      /--batch-wait \/ CONVEYOR_BATCH_WAIT is set but --batch-size \/ CONVEYOR_BATCH_SIZE is 1/,
    );
    assert.throws(
      () => loadWorkerConfig([...BASE, "--batch-size", "5", "--batch-wait", "soon"], {}),
      /batch-wait/,
    );
    assert.throws(
      () => loadWorkerConfig([...BASE, "--batch-size", "5", "--batch-min", "3"], {}),
      /--batch-min \/ CONVEYOR_BATCH_MIN 3 needs --batch-wait \/ CONVEYOR_BATCH_WAIT/,
    );
    assert.throws(
      () => loadWorkerConfig([...BASE, "--batch-size", "10000", "--concurrency", "100"], {}),
      /= 1000000 jobs held at once: at most 100000/,
    );
  });

  it("--help says once how durations are written", () => {
    assert.equal(WORKER_USAGE.match(/a bare number is seconds/g)?.length, 1);
  });

  it("notifications: --notify with its secret file; a bad value names its flag", () => {
    const dir = mkdtempSync(join(tmpdir(), "cvy-notify-config-"));
    const secret = join(dir, "secret");
    writeFileSync(secret, "whsec_0123456789abcdef\n");
    const short = join(dir, "short");
    writeFileSync(short, "abc");
    const n = (...args: string[]) => loadWorkerConfig([...BASE, ...args], {});
    const c = n(
      "--notify",
      "https://hooks.example.com/x",
      "--notify-secret-file",
      secret,
      "--notify-events",
      "dead",
    );
    assert.deepEqual(c.notify && [c.notify.url, c.notify.events, c.notify.secret, c.notify.retryMaxMs], [
      "https://hooks.example.com/x",
      ["dead"],
      "whsec_0123456789abcdef",
      86_400_000,
    ]);
    assert.deepEqual(n("--notify", "https://h.example/x", "--notify-secret-file", secret).notify?.events, [
      "completed",
      "dead",
      "cancelled",
    ]);
    // (a secret alone: jobs' own notify URLs are sent; the pool notifies nothing)
    assert.deepEqual(n("--notify-secret-file", secret).notify?.events, []);
    assert.equal(n().notify, undefined);
    assert.throws(
      () => n("--notify", "ftp://x", "--notify-secret-file", secret),
      /--notify \/ CONVEYOR_NOTIFY_URL.*http/,
    );
    assert.throws(() => n("--notify", "https://h.example/x"), /--notify .*needs --notify-secret-file/);
    assert.throws(
      () =>
        n(
          "--notify",
          "https://h.example/x",
          "--notify-secret-file",
          secret,
          "--notify-events",
          "completed,done",
        ),
      /--notify-events .*"done" is not one of completed, dead, cancelled/,
    );
    assert.throws(
      () =>
        n("--notify", "https://h.example/x", "--notify-secret-file", secret, "--notify-allow", "10.0.0.0/99"),
      /--notify-allow .*"10.0.0.0\/99" is not a CIDR/,
    );
    assert.throws(
      () => n("--notify", "https://h.example/x", "--notify-secret-file", short),
      /--notify-secret-file .*at least 16/,
    );
    assert.throws(
      () => n("--notify", "https://h.example/x", "--notify-secret-file", join(dir, "missing")),
      /--notify-secret-file .*cannot read/,
    );
    assert.throws(
      () => n("--notify-secret-file", secret, "--notify-events", "dead"),
      /--notify-events .*is set but --notify .*is not/,
    );
  });
});
