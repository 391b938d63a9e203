"""A Python stage handler served as the worker pod's HTTP sidecar (conveyor.handler.serve).

It "reads" a document: counts the words of each page, reporting progress and a log line per
page. Bad input is dead-lettered at once (NonRetryableError); a page source that is down defers
the job without spending an attempt (DependencyFailure). Run locally:

    PYTHONPATH=clients/python python3 examples/python/sidecar.py          # listens on 127.0.0.1:8080
    conveyor worker --queue docs/read --handler http://127.0.0.1:8080/run --redis redis://127.0.0.1:6379
"""

import os
import time
from typing import Any, Dict

from conveyor.handler import Context, DependencyFailure, Job, NonRetryableError, serve


def read_document(job: Job, ctx: Context) -> Dict[str, Any]:
    pages = job.data.get("pages") if isinstance(job.data, dict) else None
    if not isinstance(pages, list) or not all(isinstance(p, str) for p in pages):
        raise NonRetryableError('expected {"pages": ["text of page 1", ...]}')
    if job.data.get("source") == "offline":
        raise DependencyFailure("the page store is unreachable")
    words = []
    for i, page in enumerate(pages, start=1):
        if ctx.cancelled():  # timed out, handed back at the drain deadline, or the lease was lost
            raise RuntimeError(f"stopped at page {i}")
        words.append(len(page.split()))
        time.sleep(float(job.data.get("page_seconds", 0)))  # stands in for real work (OCR, an LLM call)
        ctx.progress(i / len(pages), f"page {i}/{len(pages)}")
        ctx.log(f"page {i}: {words[-1]} words")
    return {"pages": len(pages), "words": sum(words), "per_page": words}


if __name__ == "__main__":
    serve(read_document, port=int(os.environ.get("PORT", "8080")))
