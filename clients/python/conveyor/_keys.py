"""Names and the Redis key layout of docs/protocol.md ("Names and hash tags", "Keys")."""

import re

KEY_ROOT = "cvy"
PIPELINES_KEY = f"{KEY_ROOT}:pipelines"
# Known queues, for listings (the dashboard): registered with the pipeline, once per process and queue.
QUEUES_KEY = f"{KEY_ROOT}:queues"

QUEUE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}(/[A-Za-z0-9][A-Za-z0-9._-]{0,99})?$")
JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")


class InvalidNameError(ValueError):
    """A queue name or job id outside the protocol's patterns."""


def check_queue(queue: str) -> str:
    if not isinstance(queue, str) or not QUEUE_NAME.fullmatch(queue):
        raise InvalidNameError(
            f"invalid queue name {queue!r}: use letters, digits, '.', '_', '-', optionally as 'pipeline/stage'"
        )
    return queue


def check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
        raise InvalidNameError(f"invalid job id {job_id!r}: use letters, digits, '.', '_', ':', '-' (at most 200)")
    return job_id


def pipeline_of(queue: str) -> str:
    return check_queue(queue).split("/")[0]


class PipelineKeys:
    """`P` = cvy:{<pipeline>}: and the keys of the whole pipeline."""

    def __init__(self, pipeline: str) -> None:
        self.pipeline = pipeline
        self.prefix = f"{KEY_ROOT}:{{{pipeline}}}:"
        self.job_prefix = self.prefix + "job:"
        self.outbox = self.prefix + "outbox"
        self.meta = self.prefix + "meta"
        self.seq = self.prefix + "seq"
        self.fence = self.prefix + "fence"

    def job(self, job_id: str) -> str:
        return self.job_prefix + job_id

    def logs(self, job_id: str) -> str:
        return f"{self.prefix}logs:{job_id}"

    def data(self, job_id: str) -> str:
        """A waiting job's data longer than 64 B, until it is claimed (docs/protocol.md)."""
        return f"{self.prefix}data:{job_id}"


class QueueKeys(PipelineKeys):
    """`Q` = P + q:<queue>: and the keys of one queue (one stage)."""

    def __init__(self, queue: str) -> None:
        super().__init__(pipeline_of(queue))
        self.queue = queue
        q = f"{self.prefix}q:{queue}:"
        self.ready = q + "ready"
        # priority-0 ready jobs in FIFO order (a list), and how many of its entries are stale
        self.line = q + "line"
        self.line_stale = q + "lineStale"
        self.delayed = q + "delayed"
        self.inflight = q + "inflight"
        self.dead = q + "dead"
        self.counts = q + "counts"
        self.wake = q + "wake"
        self.workers = q + "workers"
        self.events = q + "events"
        self.idempotency_prefix = q + "idem:"
        # groups (docs/protocol.md, "Groups"): group → its waiting jobs, field '' = all groups
        self.group_waiting = q + "gwaiting"
        # resources (docs/protocol.md, "Resources"): group → the resource it waits for
        self.group_budget = q + "gbudget"
