"""Batch handlers for the kit's tests: each job's data says its outcome."""

from typing import Any, List

from conveyor.handler import Context, Job, NonRetryableError, batch


@batch
def embed(jobs: List[Job], contexts: List[Context]) -> List[Any]:
    if any(j.data.get("boom") and j.attempt == 1 for j in jobs):
        raise RuntimeError("endpoint down")
    out: List[Any] = []
    for job in jobs:
        if job.data.get("bad"):
            out.append(NonRetryableError(f"row {job.id} is bad"))
        else:
            out.append({"n": job.data["n"] * 2, "batch": len(jobs), "attempt": job.attempt})
    return out
