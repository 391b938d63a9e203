// Unit tier: the operator's queue-control arithmetic (pause, rate limit, resources, group caps).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { WorkerReport } from "../../queue/index.ts";
import { withDefaults } from "../apis/v1alpha1/types.ts";
import {
  bindingCap,
  controlChanges,
  controlSummary,
  groupAdmissionCap,
  medianJobMs,
  pausedReplicas,
  rateLimitCap,
  replicaSlots,
  resourceCap,
  resourceChanges,
  specControl,
  specResources,
} from "./queueControl.ts";
import { validateSpec } from "./validate.ts";

/** A job time as jobTimeOf gives it: a mean over the attempts that ended lately. */
const ms = (jobMs: number) => ({ jobMs, jobMsFrom: "mean of 12" });
const spec = (extra: Record<string, unknown> = {}) =>
  withDefaults({
    queue: "q",
    redis: { url: "redis://r:6379" },
    handler: { module: "/h.js" },
    concurrency: 8,
    scaling: { minReplicas: 0, maxReplicas: 20 },
    ...extra,
  } as Parameters<typeof withDefaults>[0]);

describe("operator queue control", () => {
  test("the spec manages only what it sets; changes are what differ from Redis", () => {
    assert.deepEqual(specControl(spec()), {});
    assert.deepEqual(specControl(spec({ paused: false, rateLimit: "50/s" })), {
      paused: false,
      rateLimit: { max: 50, perMs: 1000 },
    });
    const have = { paused: true, rateLimit: { max: 50, perMs: 1000 } };
    assert.deepEqual(controlChanges(specControl(spec({ paused: false, rateLimit: "50/s" })), have), {
      paused: false,
    });
    assert.deepEqual(controlChanges(specControl(spec()), have), {}, "unset: the CLI's setting stays");
    assert.deepEqual(
      controlChanges(specControl(spec({ rateLimit: "10/m" })), { paused: false, rateLimit: null }),
      {
        rateLimit: { max: 10, perMs: 60_000 },
      },
    );
  });

  test("a paused pool keeps ceil(inflight / concurrency) replicas, never below its minimum", () => {
    assert.equal(pausedReplicas(17, 8, 0), 3);
    assert.equal(pausedReplicas(0, 8, 0), 0);
    assert.equal(pausedReplicas(0, 8, 2), 2);
    assert.equal(pausedReplicas(3, 8, 1), 1);
  });

  test("rate-limit cap = ceil(rate × job s / concurrency) + 1, within min..max; none without durations", () => {
    const s = spec();
    assert.deepEqual(rateLimitCap({ max: 50, perMs: 1000 }, ms(400), s).cap, 4); // 50 × 0.4 / 8 = 2.5 → 3 + 1
    assert.equal(rateLimitCap({ max: 600, perMs: 60_000 }, ms(2000), s).cap, 4); // 10/s × 2 s / 8 → 3 + 1
    assert.equal(rateLimitCap({ max: 100_000, perMs: 1000 }, ms(5000), s).cap, 20, "never above maxReplicas");
    assert.equal(
      rateLimitCap({ max: 1, perMs: 3_600_000 }, ms(10), spec({ scaling: { minReplicas: 2 } })).cap,
      2,
    );
    const unknown = rateLimitCap({ max: 50, perMs: 1000 }, {}, s);
    assert.deepEqual([unknown.cap, /not capped/.test(unknown.reason)], [20, true]);
    assert.match(
      rateLimitCap({ max: 50, perMs: 1000 }, ms(400), s).reason,
      /50\/s × job 400ms \(mean of 12\) \/ concurrency 8 → 4/,
    );
  });

  test("a batch pool's replica holds concurrency × batch.size jobs: caps count in those slots", () => {
    const s = spec({ concurrency: 2, batch: { size: 50 } });
    assert.equal(replicaSlots(s), 100);
    assert.equal(replicaSlots(spec()), 8);
    const cap = rateLimitCap({ max: 500, perMs: 1000 }, ms(1000), s); // 500/s × 1 s / 100 = 5 → 5 + 1
    assert.equal(cap.cap, 6);
    assert.match(cap.reason, /\/ concurrency 2 × batch 50 → 6 replica/);
    const groups = { waiting: 100, admissible: 100, complete: true, scanned: 1, ring: 1 };
    const g = groupAdmissionCap({ ready: 100, dueDelayed: 0, inflight: 150 }, groups, s);
    assert.equal(g?.cap, 3); // 250 slots / 100
    assert.deepEqual(validateSpec(spec({ batch: { size: 10, minSize: 20, waitMs: 100 } })), [
      "spec.batch: minSize (20) must be <= size (10)",
    ]);
    assert.deepEqual(validateSpec(spec({ batch: { size: 10, minSize: 5 } })), [
      "spec.batch: minSize above 1 needs waitMs (how long a claimed job may wait for the others)",
    ]);
    assert.deepEqual(
      validateSpec(spec({ handler: { python: { callable: "m:f" } }, batch: { size: 10 } })),
      [],
    );
  });

  test("the median job duration comes from fresh worker reports only", () => {
    const r = (jobP50Ms: number | undefined, seen: number): WorkerReport => ({
      id: "w",
      pod: "p",
      slots: 8,
      busy: 1,
      draining: false,
      seen,
      ...(jobP50Ms !== undefined ? { jobP50Ms } : {}),
    });
    assert.equal(medianJobMs([], 1000), undefined);
    assert.equal(medianJobMs([r(100, 1000), r(300, 1000), r(200, 1000), r(undefined, 1000)], 1000), 200);
    assert.equal(medianJobMs([r(100, 0), r(900, 100_000)], 100_000), 900);
  });

  test("the kubectl column", () => {
    assert.equal(controlSummary(true, { max: 5, perMs: 1000 }, 2), "paused");
    assert.equal(controlSummary(false, { max: 5, perMs: 1000 }, 2), "limited 5/s (cap 2)");
    assert.equal(controlSummary(false, null, undefined), "");
    assert.equal(controlSummary(false, null, 3, "groups"), "groups (cap 3)");
    assert.equal(controlSummary(false, { max: 5, perMs: 1000 }, 3, "groups"), "limited 5/s, groups (cap 3)");
    assert.equal(controlSummary(false, null, 3, "resources", ["openai"]), "budget openai (cap 3)");
    assert.equal(
      controlSummary(false, { max: 5, perMs: 1000 }, 2, "resources", ["openai", "ocr"]),
      "limited 5/s, budget openai,ocr (cap 2)",
    );
  });

  const admission = (waiting: number, admissible: number, complete = true) => ({
    waiting,
    admissible,
    scanned: complete ? 10 : 2000,
    ring: complete ? 10 : 100_000,
    complete,
  });

  test("groups' cap: running + other ready + admissible grouped jobs, over concurrency", () => {
    const s = spec(); // concurrency 8, 0..20 replicas
    const counts = { ready: 5000, dueDelayed: 0, inflight: 16 };
    // Every waiting job is grouped; 8 of them may start (the rest wait for groups at their limit).
    const cap = groupAdmissionCap(counts, admission(5000, 8), s)!;
    assert.equal(cap.cap, 3); // (16 + 8) / 8
    assert.equal(cap.by, "groups");
    assert.match(
      cap.reason,
      /8 of 5000 grouped waiting job\(s\) can start, 4992 wait for groups at their limit/,
    );
    assert.match(cap.reason, /16 running \+ 0 other ready \+ 8 = 24 slot\(s\) \/ concurrency 8 → 3 replica/);
    // Ungrouped and due-delayed jobs count whole.
    assert.equal(
      groupAdmissionCap({ ready: 5040, dueDelayed: 8, inflight: 16 }, admission(5000, 8), s)!.cap,
      9,
    );
    // All groups paused and nothing running: the minimum, at least one (the backlog keeps one pod).
    assert.equal(groupAdmissionCap({ ready: 50, dueDelayed: 0, inflight: 0 }, admission(50, 0), s)!.cap, 1);
    assert.equal(
      groupAdmissionCap(
        { ready: 50, dueDelayed: 0, inflight: 0 },
        admission(50, 0),
        spec({ scaling: { minReplicas: 2 } }),
      )!.cap,
      2,
    );
  });

  test("groups' cap: none without grouped jobs or when it would not bind; an estimate says so", () => {
    const s = spec();
    assert.equal(groupAdmissionCap({ ready: 10, dueDelayed: 0, inflight: 0 }, undefined, s), undefined);
    assert.equal(groupAdmissionCap({ ready: 10, dueDelayed: 0, inflight: 0 }, admission(0, 0), s), undefined);
    // 200 admissible: 25 replicas wanted ≥ maxReplicas 20 — not a cap.
    assert.equal(
      groupAdmissionCap({ ready: 5000, dueDelayed: 0, inflight: 0 }, admission(5000, 200), s),
      undefined,
    );
    const est = groupAdmissionCap(
      { ready: 5000, dueDelayed: 0, inflight: 0 },
      admission(5000, 40, false),
      s,
    )!;
    assert.equal(est.cap, 5);
    assert.match(est.reason, /estimated from 2000 of 100000 groups/);
  });

  test("the lowest cap binds, the first of equals", () => {
    const rate = { cap: 4, reason: "rate", by: "rateLimit" as const };
    const groups = { cap: 3, reason: "groups", by: "groups" as const };
    assert.equal(bindingCap([rate, groups]), groups);
    assert.equal(bindingCap([rate, { ...groups, cap: 4 }]), rate);
    assert.equal(bindingCap([undefined, groups]), groups);
    assert.equal(bindingCap([undefined, undefined]), undefined);
  });
});

describe("operator resources", () => {
  const openai = (keys = 3, requests = "60/m", ceiling?: number) => ({
    name: "openai",
    ...(ceiling !== undefined ? { ceiling } : {}),
    secretRef: { name: "openai-keys" },
    keys: Array.from({ length: keys }, (_, i) => ({
      id: `k${i + 1}`,
      limits: [`requests=${requests}`, "tokens=200000/m"],
    })),
  });

  test("spec.resources parse to key limits with the ceiling as a fraction (default 0.9)", () => {
    assert.deepEqual(specResources(spec({ resources: [openai(1, "60/m", 80)] })), [
      {
        name: "openai",
        ceiling: 0.8,
        keys: [
          {
            id: "k1",
            limits: [
              { unit: "requests", max: 60, windowMs: 60_000 },
              { unit: "tokens", max: 200_000, windowMs: 60_000 },
            ],
          },
        ],
      },
    ]);
    assert.equal(specResources(spec({ resources: [openai(1)] }))[0]!.ceiling, 0.9);
    assert.deepEqual(specResources(spec()), []);
  });

  test("bad limits are an InvalidSpec problem naming the field", () => {
    const bad = spec({
      resources: [{ name: "openai", keys: [{ id: "k1", limits: ["requests=60/m", "requests=10/s"] }] }],
    });
    assert.deepEqual(validateSpec(bad), ["spec.resources[0].keys[0].limits: requests is limited twice"]);
    const zero = spec({ resources: [{ name: "openai", keys: [{ id: "k1", limits: ["requests=0/m"] }] }] });
    assert.match(
      validateSpec(zero).join(),
      /spec\.resources\[0\]\.keys\[0\]\.limits: requests max must be an integer 1\.\./,
    );
    assert.deepEqual(validateSpec(spec({ resources: [openai()] })), []);
    const nothing = spec({ resources: [{ name: "x", keys: [{ id: "k1", limits: ["requests=1/m"] }] }] });
    assert.deepEqual(validateSpec(nothing), [
      "spec.resources[0].keys[0].limits: requests=1 at ceiling 90% admits nothing (floor(0.9 × 1) = 0)",
    ]);
    const badId = spec({ resources: [{ name: "x", keys: [{ id: "../k1", limits: ["requests=9/m"] }] }] });
    assert.match(validateSpec(badId).join(), /spec\.resources\[0\]\.keys\[0\]\.id "\.\.\/k1" is invalid/);
  });

  test("resource cap = ceil(Σ keys' admissible requests/s × job s / concurrency) + 1; the tightest resource binds", () => {
    const s = spec(); // concurrency 8, maxReplicas 20
    // 3 keys × floor(0.9 × 60) = 54/min → 2.7/s; × 20 s / 8 = 6.75 → 7 + 1 = 8.
    const c = resourceCap(specResources(spec({ resources: [openai()] })), ms(20_000), s)!;
    assert.equal(c.cap, 8);
    assert.equal(c.by, "resources");
    assert.match(
      c.reason,
      /resource openai \(3 key\(s\), 2\.7 requests\/s at ceiling 90%\) × job 20000ms \(mean of 12\) \/ concurrency 8 → 8 replica\(s\)/,
    );
    // A second, tighter resource binds: 1 key × floor(0.5 × 10) = 5/min.
    const ocr = { name: "ocr", ceiling: 50, keys: [{ id: "main", limits: ["requests=10/m"] }] };
    const both = resourceCap(specResources(spec({ resources: [openai(), ocr] })), ms(20_000), s)!;
    assert.equal(both.cap, 2); // 5/60 × 20 / 8 = 0.21 → 1 + 1
    assert.match(both.reason, /^resource ocr /);
    // Never above maxReplicas, never below max(1, minReplicas).
    assert.equal(
      resourceCap(specResources(spec({ resources: [openai(3, "6000/s")] })), ms(60_000), s)!.cap,
      20,
    );
    const min = spec({ scaling: { minReplicas: 4 }, resources: [ocr] });
    assert.equal(resourceCap(specResources(min), ms(100), min)!.cap, 4);
    // Without durations: not capped, and the reason says so.
    const unknown = resourceCap(specResources(spec({ resources: [openai()] })), {}, s)!;
    assert.deepEqual([unknown.cap, /not capped/.test(unknown.reason)], [20, true]);
    // A key without a requests limit admits at any rate: that resource caps nothing.
    const tokensOnly = { name: "emb", keys: [{ id: "a", limits: ["tokens=1000/m"] }] };
    assert.equal(resourceCap(specResources(spec({ resources: [tokensOnly] })), ms(1000), s), undefined);
    assert.equal(resourceCap([], ms(1000), s), undefined);
  });

  test("the binding cap is the lowest, with its reason", () => {
    const rate = { cap: 5, reason: "rate", by: "rateLimit" as const };
    const budget = { cap: 3, reason: "budget", by: "resources" as const };
    assert.equal(bindingCap([rate, budget]), budget);
    assert.equal(bindingCap([rate, undefined]), rate);
    assert.equal(bindingCap([{ ...budget, cap: 5 }, rate])?.by, "resources", "the first of equals");
    assert.equal(bindingCap([undefined, undefined]), undefined);
  });

  test("resources are written only when keys, limits or ceiling differ from Redis", () => {
    const want = specResources(spec({ resources: [openai(2)] }));
    const state = (r: (typeof want)[number]) => ({
      pipeline: "p",
      name: r.name,
      ceiling: r.ceiling,
      waiting: 3,
      waitingByQueue: { "p/a": 3 },
      keys: r.keys.map((k) => ({
        id: k.id,
        benchedUntil: null,
        admitted: 12,
        // Redis may list limits in another order; windows and usage do not matter.
        limits: [...k.limits].reverse().map((l) => ({ ...l, used: 7, utilization: 0.1 })),
      })),
    });
    assert.deepEqual(resourceChanges(want, [state(want[0]!)]), []);
    assert.deepEqual(resourceChanges(want, []), want, "absent: written");
    assert.deepEqual(resourceChanges(want, [{ ...state(want[0]!), ceiling: 0.5 }]), want);
    const moreKeys = specResources(spec({ resources: [openai(3)] }));
    assert.deepEqual(resourceChanges(moreKeys, [state(want[0]!)]), moreKeys);
    const otherLimit = specResources(spec({ resources: [openai(2, "30/m")] }));
    assert.deepEqual(resourceChanges(otherLimit, [state(want[0]!)]), otherLimit);
  });
});
