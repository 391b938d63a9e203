"""One handler for the sidecar and the command tests; the job's data says what to do."""

import time
from typing import Any, Dict

import os

from conveyor.handler import Context, DependencyFailure, Job, NonRetryableError, RateLimited

#: The last context of each job, so a test can use a callback token after its execution ended.
contexts: Dict[str, Context] = {}


def handle(job: Job, ctx: Context) -> Any:
    contexts[job.id] = ctx
    mode = job.data.get("mode", "ok")
    if mode == "ok":
        steps = job.data.get("steps", 2)
        for i in range(steps):
            ctx.log(f"step {i + 1} of {steps}")
            assert ctx.progress((i + 1) / steps, f"step {i + 1}/{steps}")
        print("a print() in a command handler goes to stderr, not into the result")
        return {
            "id": job.id,
            "attempt": job.attempt,
            "queue": job.queue,
            "execution": job.execution_id,
            "double": job.data.get("n", 0) * 2,
        }
    if mode == "long-log":
        return ctx.log("é" * 10000)  # longer than a job log line keeps
    if mode == "fail-while":  # dead at once while the flag file exists
        if os.path.exists(job.data["flag"]):
            raise NonRetryableError("the flag is up")
        return {"id": job.id}
    if mode == "bad":
        ctx.log("refusing this input")
        raise NonRetryableError("no recipient")
    if mode == "flaky":
        if job.attempt < 2:
            raise RuntimeError("first attempt fails")
        return {"attempt": job.attempt}
    if mode == "llm":
        raise RuntimeError("LLM timeout")
    if mode == "dependency":
        raise DependencyFailure("the OCR service is down")
    if mode == "until-cancelled":
        ctx.log("waiting to be stopped")
        deadline = time.monotonic() + 30
        while not ctx.cancelled() and time.monotonic() < deadline:
            time.sleep(0.05)
        if job.data.get("marker"):  # (a command handler's only way to tell the test)
            with open(job.data["marker"], "w") as f:
                f.write(f"saw_cancel={ctx.cancelled()}")
        return {"saw_cancel": ctx.cancelled()}
    if mode == "budget":
        # (docs/budgets.md) the key granted; the first execution on `limit_key` is rate-limited
        key = ctx.resources.get("llm", "")
        marker = job.data.get("marker")
        if key == job.data.get("limit_key") and marker:
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                raise RateLimited("429 from the provider", retry_after=30)
            except FileExistsError:
                pass
        assert ctx.usage({"llm": {"tokens": job.data.get("used", 0)}})
        return {"key": key, "attempt": job.attempt}
    raise ValueError(f"unknown mode {mode!r}")
