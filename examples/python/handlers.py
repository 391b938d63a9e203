"""A two-stage Python pipeline run by the worker's `python:` handler: one worker command (or
WorkerPool) per stage, each starting and supervising one Python process — no sidecar, no port.

    docs/extract    extract(job, ctx)    {"text": "..."}          -> {"words": [...], "sentences": n}
    docs/summarize  summarize(job, ctx)  the extract stage's result -> {"top": [[word, count], ...], ...}

Run locally from this directory, one command per stage (Redis on 127.0.0.1:6379):

    conveyor worker --queue docs/extract --next-queue docs/summarize --handler python:handlers:extract --concurrency 4
    conveyor worker --queue docs/summarize --handler python:handlers:summarize --concurrency 4
    PYTHONPATH=../../clients/python python3 pipeline.py redis://127.0.0.1:6379 5

The worker puts its working directory on the Python path and starts `python3 -m conveyor.handler
--stdio handlers:extract` (the kit from this checkout, or an installed one; CONVEYOR_PYTHON picks
the interpreter). On Kubernetes the same stages are pipeline.yaml's two WorkerPools.
"""

import re
from collections import Counter
from typing import Any, Dict

from conveyor.handler import Context, Job, NonRetryableError

WORD = re.compile(r"[a-zA-Z']+")


def extract(job: Job, ctx: Context) -> Dict[str, Any]:
    text = job.data.get("text") if isinstance(job.data, dict) else None
    if not isinstance(text, str):
        raise NonRetryableError('expected {"text": "..."}')
    words = [w.lower() for w in WORD.findall(text)]
    print(f"extract {job.id}: {len(words)} words")  # to the worker's stderr, never into the result
    ctx.log(f"{len(words)} words")
    return {"words": words, "sentences": max(1, len(re.findall(r"[.!?]+", text)))}


def summarize(job: Job, ctx: Context) -> Dict[str, Any]:
    words = job.data["words"]
    counts = Counter(w for w in words if len(w) > 3)
    top = sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[:3]
    ctx.log(f"top word: {top[0][0] if top else '-'}")
    return {"top": [[w, n] for w, n in top], "words": len(words), "sentences": job.data["sentences"]}
