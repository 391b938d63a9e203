"""Conveyor for Python: a producer and read client speaking the queue protocol through the
same Lua scripts as the TypeScript producer (conveyor.Client), and a handler kit for worker
pools whose stage runs in Python (conveyor.handler)."""

from ._keys import InvalidNameError
from .client import (
    DEFAULT_ATTEMPTS,
    DEFAULT_MAX_PAYLOAD_BYTES,
    Client,
    Enqueued,
    Event,
    InvalidJobError,
    Job,
    LogLine,
    PayloadTooLargeError,
)

__all__ = [
    "Client",
    "DEFAULT_ATTEMPTS",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "Enqueued",
    "Event",
    "InvalidJobError",
    "InvalidNameError",
    "Job",
    "LogLine",
    "PayloadTooLargeError",
]
__version__ = "0.1.0"
