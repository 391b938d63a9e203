"""Names and the Redis key layout of docs/protocol.md ("Names and hash tags", "Keys")."""

import re

from ._keys_generated import (  # noqa: F401 - re-exported
    JOB_ID_PATTERN,
    KEY_ROOT,
    PIPELINES_KEY,
    QUEUE_NAME_PATTERN,
    QUEUES_KEY,
    PipelineKeyLayout,
    QueueKeyLayout,
)

QUEUE_NAME = re.compile(QUEUE_NAME_PATTERN)
JOB_ID = re.compile(JOB_ID_PATTERN)


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


class PipelineKeys(PipelineKeyLayout):
    """`P` = cvy:{<pipeline>}: and the keys of the whole pipeline (the layout: queue/keyTable.ts)."""


class QueueKeys(QueueKeyLayout):
    """`Q` = P + q:<queue>: and the keys of one queue (one stage); the name is checked."""

    def __init__(self, queue: str) -> None:
        super().__init__(pipeline_of(queue), queue)
