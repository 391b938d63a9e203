"""A Tasks registry for test_handlers.py's named-task test, served by every handler kind: the
first attempt of `summarize` fails, the second answers with what it was told."""

from conveyor.handler import Tasks

tasks = Tasks()


@tasks.task("summarize")
def summarize(job):
    if job.attempt == 1:
        raise RuntimeError("the first attempt fails")
    return {"task": job.task, "previous": job.previous_errors}


@tasks.task("classify")
def classify(job, ctx):
    return {"task": job.task, "data": job.data, "callback": ctx.has_callback}


@tasks.task("parents")
def parents(job):
    return {"parents": job.parents}


@tasks.task("big")
def big(job):
    return "b" * 5000  # over 1 KiB: its dependents get it by reference


@tasks.task("fetch")
def fetch(job, ctx):
    return {key: ctx.parent_result(key) for key in sorted(job.parents or {})}
