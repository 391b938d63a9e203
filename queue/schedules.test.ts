// Unit tier: schedule specs and tick arithmetic (no Redis) — intervals, cron in a time zone
// across DST changes, missed ticks collapsing, and bad input named clearly.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { CATCH_UP_MS, makeSchedule, nextTick, parseTickId, tickAfter, ScheduleError } from "./schedules.ts";
import { formatRateLimit, parseRateLimit, RateLimitError } from "./control.ts";

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

describe("schedules", () => {
  test("every: ticks fall on anchor + k·interval, strictly after the given time", () => {
    const s = makeSchedule("tick", { everyMs: 60_000 }, T0);
    assert.equal(nextTick(s, T0), T0 + 60_000);
    assert.equal(nextTick(s, T0 + 59_999), T0 + 60_000);
    assert.equal(nextTick(s, T0 + 60_000), T0 + 120_000);
  });

  test("cron in UTC and in a time zone", () => {
    const utc = makeSchedule("hourly", { cron: "0 * * * *" }, T0);
    assert.equal(iso(nextTick(utc, T0)), "2026-01-01T13:00:00.000Z");
    const ny = makeSchedule("nine", { cron: "0 9 * * *", tz: "America/New_York" }, T0);
    assert.equal(iso(nextTick(ny, T0)), "2026-01-01T14:00:00.000Z"); // 12:00Z is 07:00 EST; 09:00 EST = 14:00Z
    const secs = makeSchedule("every5s", { cron: "*/5 * * * * *" }, T0);
    assert.equal(nextTick(secs, T0 + 1), T0 + 5000);
  });

  test("DST: a daily 09:00 in Europe/Berlin moves from 08:00Z to 07:00Z across the March change, and back in October", () => {
    const s = makeSchedule("nine", { cron: "0 9 * * *", tz: "Europe/Berlin" }, Date.UTC(2026, 2, 27));
    let t = Date.UTC(2026, 2, 27, 12); // Friday before the change (Sunday 29 March 2026)
    const runs: (string | null)[] = [];
    for (let i = 0; i < 3; i++) runs.push(iso((t = nextTick(s, t)!)));
    assert.deepEqual(runs, [
      "2026-03-28T08:00:00.000Z",
      "2026-03-29T07:00:00.000Z",
      "2026-03-30T07:00:00.000Z",
    ]);
    t = Date.UTC(2026, 9, 24, 12); // the change back is Sunday 25 October 2026
    assert.equal(iso((t = nextTick(s, t)!)), "2026-10-25T08:00:00.000Z");
  });

  test("DST: an hourly cron in Berlin has 23 runs on the spring day and 25 on the autumn day; 02:30 on the spring day does not exist and runs once, at 03:00", () => {
    const hourly = makeSchedule("h", { cron: "0 * * * *", tz: "Europe/Berlin" }, 0);
    const runsBetween = (from: number, to: number) => {
      let n = 0;
      for (let t = nextTick(hourly, from - 1)!; t < to; t = nextTick(hourly, t)!) n++;
      return n;
    };
    // Local midnight to midnight: 2026-03-29 00:00 CET = 03-28T23:00Z; 2026-10-25 00:00 CEST = 10-24T22:00Z.
    assert.equal(runsBetween(Date.UTC(2026, 2, 28, 23), Date.UTC(2026, 2, 29, 22)), 23);
    assert.equal(runsBetween(Date.UTC(2026, 9, 24, 22), Date.UTC(2026, 9, 25, 23)), 25);
    const skipped = makeSchedule("s", { cron: "30 2 * * *", tz: "Europe/Berlin" }, 0);
    const first = nextTick(skipped, Date.UTC(2026, 2, 28, 12))!;
    assert.equal(iso(first), "2026-03-29T01:00:00.000Z"); // 03:00 CEST
    assert.equal(iso(nextTick(skipped, first)), "2026-03-30T00:30:00.000Z"); // 02:30 CEST the next day
  });

  test("the tick after a late tick: caught up one by one within CATCH_UP_MS, collapsed beyond", () => {
    const s = makeSchedule("tick", { everyMs: 1000 }, T0);
    const t1 = T0 + 1000;
    assert.equal(tickAfter(s, t1, t1 + 20), t1 + 1000, "on time: the next");
    assert.equal(tickAfter(s, t1, t1 + 2500), t1 + 1000, "a little late: still the next (due now)");
    // Down for a minute: the running tick stands for every missed one; the next is in the future.
    const now = t1 + 60_000 + 300;
    assert.equal(tickAfter(s, t1, now), T0 + 62_000);
    assert.ok(tickAfter(s, t1, t1 + CATCH_UP_MS + 1500)! > t1 + CATCH_UP_MS + 1500);
    const hourly = makeSchedule("h", { cron: "0 * * * *" }, T0);
    assert.equal(
      iso(tickAfter(hourly, T0 + 3_600_000, T0 + 5 * 3_600_000 + 60_000)),
      "2026-01-01T18:00:00.000Z",
    );
  });

  test("tick job ids carry the schedule and the tick time; other ids are not ticks", () => {
    assert.deepEqual(parseTickId(`sched:nightly.report:${T0}`), { name: "nightly.report", tick: T0 });
    assert.equal(parseTickId("sched:bad name:1"), null);
    assert.equal(parseTickId("job-1"), null);
  });

  test("malformed schedules get a ScheduleError naming the problem", () => {
    const bad: [string, Parameters<typeof makeSchedule>[1], RegExp][] = [
      ["ok", {}, /exactly one of every .* or cron/],
      ["ok", { everyMs: 1000, cron: "* * * * *" }, /exactly one/],
      ["ok", { everyMs: 10 }, /at least 1000/],
      ["ok", { everyMs: 1.5e3 + 0.5 }, /whole number/],
      ["ok", { cron: "61 * * * *" }, /invalid cron expression "61 \* \* \* \*"/],
      ["ok", { cron: "every day" }, /invalid cron expression/],
      ["ok", { cron: "0 0 30 2 *" }, /never fires|invalid cron/],
      ["ok", { cron: "0 * * * *", tz: "Mars/Olympus_Mons" }, /invalid time zone "Mars\/Olympus_Mons"/],
      ["ok", { everyMs: 5000, tz: "UTC" }, /tz applies to cron schedules only/],
      ["ok", { everyMs: 5000, attempts: 0 }, /attempts must be an integer/],
      ["bad name!", { everyMs: 5000 }, /invalid schedule name "bad name!"/],
      ["", { everyMs: 5000 }, /invalid schedule name ""/],
      ["ok", { everyMs: 5000, data: { n: 1n } }, /schedule data is not JSON/],
    ];
    for (const [name, spec, message] of bad)
      assert.throws(
        () => makeSchedule(name, spec),
        (err: Error) => {
          assert.ok(
            err instanceof ScheduleError,
            `${name} ${JSON.stringify(spec, (_k, v) => (typeof v === "bigint" ? "1n" : v))}: ${err.name}`,
          );
          assert.match(err.message, message);
          return true;
        },
      );
  });
});

describe("rate limits", () => {
  test("N/s, N/m, N/h parse; formatting round-trips", () => {
    assert.deepEqual(parseRateLimit("20/s"), { max: 20, perMs: 1000 });
    assert.deepEqual(parseRateLimit(" 100 / m "), { max: 100, perMs: 60_000 });
    assert.deepEqual(parseRateLimit("5/h"), { max: 5, perMs: 3_600_000 });
    assert.equal(formatRateLimit(parseRateLimit("20/s")), "20/s");
    assert.equal(formatRateLimit({ max: 3, perMs: 250 }), "3/250ms");
  });

  test("malformed rates get a RateLimitError naming the input", () => {
    for (const text of [
      "",
      "20",
      "20/",
      "/s",
      "20/d",
      "0/s",
      "-1/s",
      "1.5/s",
      "20/s/x",
      "twenty/s",
      "9999999/s",
    ])
      assert.throws(
        () => parseRateLimit(text),
        (err: Error) => {
          assert.ok(err instanceof RateLimitError, text);
          assert.match(err.message, new RegExp(JSON.stringify(text).replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")));
          return true;
        },
      );
  });
});
