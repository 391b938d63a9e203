"""Handlers for test_stdio.py's `python3 -m conveyor.handler --stdio` processes."""

import asyncio
import threading
import time

from conveyor.handler import DependencyFailure, NonRetryableError, RateLimited

both_running = threading.Barrier(2, timeout=10)


def echo(job, ctx):
    print("a print goes to stderr")  # not into the frames
    return {"id": job.id, "queue": job.queue, "attempt": job.attempt, "data": job.data,
            "execution": job.execution_id, "resources": dict(ctx.resources)}


def classify(job, ctx):
    kind = job.data
    if kind == "bad":
        raise NonRetryableError("no recipient")
    if kind == "dependency":
        raise DependencyFailure("db down")
    if kind == "limited":
        raise RateLimited("429", retry_after=1.5, resource="llm")
    if kind == "not-json":
        return {1, 2}
    raise KeyError(kind)


def pair(job, ctx):
    both_running.wait()  # two jobs at once, or this times out
    return job.data


def until_cancelled(job, ctx):
    deadline = time.monotonic() + 10
    while not ctx.cancelled() and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"saw_cancel": ctx.cancelled()}


async def slow_async(job, ctx):
    await asyncio.sleep(job.data)
    return job.data


not_a_function = 42


def flow_results(job, ctx):
    """A flow's parents return a large or a small result; the sink returns what it read of them."""
    if job.data in ("big", "small"):
        return "b" * 5000 if job.data == "big" else {"n": 1}
    return {"parents": job.parents, "big": ctx.parent_result("big"), "small": ctx.parent_result("small")}
