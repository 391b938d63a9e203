// A `module` handler (examples/workerpool-module.yaml): an ES module whose default export is
// `async (job, ctx) => result`. The worker imports it once and calls it per job with a fresh
// `job` ({ id, queue, data, attempt, maxAttempts, executionId, createdAt }) and `ctx`
// ({ signal, log, progress }). Return a JSON-serializable result; throw to fail the attempt
// (retried with backoff), or throw an error with `retryable: false` to dead-letter it at once.
import { setTimeout as sleep } from "node:timers/promises";

export default async function resize(job, ctx) {
  const { url, width } = job.data ?? {};
  if (typeof url !== "string" || !Number.isInteger(width) || width <= 0) {
    throw Object.assign(new Error("resize needs {url: string, width: positive integer}"), {
      retryable: false,
    });
  }
  ctx.log.info({ url, width }, "resizing");
  // Stand-in for real work. Pass ctx.signal to everything that can wait (fetch, timers, child
  // processes): it aborts on the job timeout and when a stopping pod hands the job back.
  await sleep(200, undefined, { signal: ctx.signal });
  ctx.progress(1, "done");
  return { url, width, output: url.replace(/(\.\w+)?$/, `-w${width}$&`) };
}
