// A bench handler shaped like an embedding endpoint: a call costs 5 ms + 0.1 ms per job, whether
// it carries one job (the default export) or a batch. Each call adds a line to $BENCH_CALLS_FILE
// (its job count), so the bench counts handler calls per job.
import { appendFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

const file = process.env.BENCH_CALLS_FILE;
const cost = (n) => sleep(5 + 0.1 * n);

export default async function one(job) {
  await cost(1);
  if (file) appendFileSync(file, "1\n");
  return { id: job.id };
}

export async function batch(jobs) {
  await cost(jobs.length);
  if (file) appendFileSync(file, `${jobs.length}\n`);
  return jobs.map((j) => ({ id: j.id }));
}
