// The cost of one reclaim_finished call (docs/protocol.md, "Retention"): N completed records
// (20 B payload, the shape settle_jobs leaves) indexed 30 ids a member and due, then reclaimed
// by back-to-back calls of `--limit` ids; reports the round trip per call (p50/p99/max), Redis'
// own time per call (INFO commandstats, fcall/evalsha usec) and per key.
//   node bench/reclaimCall.ts [--records 200000] [--limit 300]
import { Consumer, QueueKeys, connectRedis } from "../queue/index.ts";
import { startBenchRedis } from "./lib/redis.ts";
import { intFlag, nowMs, cliFlags, percentile, round, runMain } from "./lib/util.ts";

async function main(): Promise<void> {
  const flags = cliFlags(["limit", "records"]);
  const records = intFlag(flags, "records", 200_000);
  const limit = intFlag(flags, "limit", 300);
  const server = await startBenchRedis();
  const redis = connectRedis(server.url, { name: "bench-reclaim" });
  try {
    const q = "reclaim/s";
    const k = new QueueKeys(q);
    const now = Date.now();
    for (let i = 0; i < records; i += 3000) {
      const p = redis.pipeline();
      for (let b = i; b < Math.min(records, i + 3000); b += 30) {
        const ids: string[] = [];
        for (let j = b; j < Math.min(records, b + 30); j++) {
          const id = `job${j.toString().padStart(16, "0")}`;
          ids.push(id);
          p.hset(
            `${k.jobPrefix}${id}`,
            "queue",
            q,
            "data",
            '{"payload":"0123456789ab"}',
            "attempts",
            "3",
            "createdAt",
            String(now),
            "state",
            "completed",
            "result",
            "null",
            "finishedAt",
            String(now),
            "token",
            "",
          );
          p.expire(`${k.jobPrefix}${id}`, 3600);
        }
        p.zadd(k.finished, now - 1, ids.join(" "));
      }
      await p.exec();
    }
    const consumer = new Consumer(redis, q, { workerId: "bench", leaseMs: 30_000 });
    await consumer.reclaimFinished(1); // (loads the scripts)
    const statsBefore = await redis.info("commandstats");
    const ms: number[] = [];
    let reclaimed = 1;
    for (;;) {
      const t = nowMs();
      const r = await consumer.reclaimFinished(limit);
      ms.push(nowMs() - t);
      reclaimed += r.reclaimed;
      if (!r.more) break;
    }
    const usec = (text: string) =>
      [...text.matchAll(/cmdstat_(?:fcall|evalsha):calls=(\d+),usec=(\d+)/g)].reduce(
        (a, m) => ({ calls: a.calls + Number(m[1]), usec: a.usec + Number(m[2]) }),
        { calls: 0, usec: 0 },
      );
    const a = usec(statsBefore);
    const b = usec(await redis.info("commandstats"));
    const calls = b.calls - a.calls - 1; // (the INFO's own call is not a script)
    const out = {
      records,
      limit,
      reclaimed,
      calls: ms.length,
      roundTripMs: {
        p50: round(percentile(ms, 50), 3),
        p99: round(percentile(ms, 99), 3),
        max: round(Math.max(...ms), 3),
      },
      redisUsPerCall: round((b.usec - a.usec) / Math.max(1, calls), 1),
      redisUsPerKey: round((b.usec - a.usec) / Math.max(1, reclaimed), 2),
      keysLeft: await redis.dbsize(),
    };
    process.stdout.write(`${JSON.stringify(out)}\n`);
  } finally {
    redis.disconnect();
    await server.stop();
  }
}

if (import.meta.main) runMain("bench:reclaim", main);
