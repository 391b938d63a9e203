// The operator and the worker agree on the worker's environment: every variable the operator
// sets on a worker container is one the worker reads (or Node, or a handler).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { WORKER_SETTINGS } from "../worker/config.ts";
import { workerEnv } from "../operator/controllers/deployment.ts";
import { pool } from "../operator/controllers/fixtures.ts";
import { ENVIRONMENT } from "../lib/settings.ts";

describe("worker contract: the environment", () => {
  it("the operator sets only variables the worker reads", () => {
    const p = pool({
      queue: "docs/ocr",
      nextQueue: "docs/embed",
      redis: { url: "redis://redis:6379", secretRef: { name: "redis" }, durability: "replicated" },
      database: { secretRef: { name: "pg" } },
      handler: { command: ["/bin/ocr"], passCredentials: true },
      resources: [
        { name: "openai", secretRef: { name: "keys" }, keys: [{ id: "k1", limits: ["requests=10/1s"] }] },
      ],
    });
    const read = new Set<string>();
    for (const s of [...Object.values(WORKER_SETTINGS), ...Object.values(ENVIRONMENT)] as {
      env?: string;
      deprecatedEnv?: string;
    }[]) {
      if (s.env) read.add(s.env);
      if (s.deprecatedEnv) read.add(s.deprecatedEnv);
    }
    const set = workerEnv(p.spec, 1 << 20).map((e) => e.name);
    assert.ok(
      set.includes("CONVEYOR_RESOURCES_DIR") && set.includes("CONVEYOR_OUTBOX_MAX_BYTES"),
      set.join(" "),
    );
    assert.deepEqual(
      set.filter((n) => !read.has(n)),
      [],
    );
  });
});
