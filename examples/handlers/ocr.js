// Stage 1 of the docs pipeline (examples/pipeline.yaml), queue `docs/ocr`. Its result becomes
// the data of a `docs/embed` job: the pool's nextQueue. Completing this job and enqueueing the
// next one is one atomic step in Redis, so a crash can neither lose nor duplicate the hand-over.
import { setTimeout as sleep } from "node:timers/promises";

export default async function ocr(job, ctx) {
  const { document } = job.data ?? {};
  if (typeof document !== "string" || document === "") {
    throw Object.assign(new Error("ocr needs {document: string}"), { retryable: false });
  }
  await sleep(100, undefined, { signal: ctx.signal }); // stand-in for the OCR engine
  return { document, text: `text of ${document}`, pages: 1 };
}
