// Stage 2 of the docs pipeline (examples/pipeline.yaml), queue `docs/embed`: gets what
// ocr.js returned. An outage of the embedding service is a dependency failure: marked with
// `dependencyFailure: true`, the job is deferred without using up an attempt, and repeated
// failures pause claiming (the worker's circuit breaker) instead of burning through the queue.
import { createHash } from "node:crypto";

export default async function embed(job, ctx) {
  const { document, text } = job.data ?? {};
  if (typeof text !== "string") {
    throw Object.assign(new Error("embed needs {document, text} from the docs/ocr stage"), {
      retryable: false,
    });
  }
  const endpoint = process.env.EMBEDDINGS_URL;
  if (endpoint) {
    const res = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input: text }),
      signal: ctx.signal,
    }).catch((err) => {
      throw Object.assign(new Error(`embeddings service unreachable: ${err.message}`), {
        dependencyFailure: true,
      });
    });
    if (res.status >= 500)
      throw Object.assign(new Error(`embeddings service answered ${res.status}`), {
        dependencyFailure: true,
      });
    if (!res.ok)
      throw Object.assign(new Error(`embeddings service refused the input: ${res.status}`), {
        retryable: false,
      });
    return { document, embedding: (await res.json()).embedding };
  }
  // Without a service: a deterministic stand-in vector.
  const digest = createHash("sha256").update(text).digest();
  return { document, embedding: [...digest.subarray(0, 8)].map((b) => b / 255) };
}
