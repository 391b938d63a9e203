"""Conveyor for Python: a producer and read client speaking the queue protocol through the
same Lua scripts as the TypeScript producer (conveyor.Client), and a handler kit for worker
pools whose stage runs in Python (conveyor.handler, standard library only: importing it does
not need redis-py, so a handler image can do without it)."""

from typing import TYPE_CHECKING, Any

from ._keys import InvalidNameError

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ below loads them on first use
    from .client import (
        DEFAULT_ATTEMPTS,
        DEFAULT_MAX_PAYLOAD_BYTES,
        Cancelled,
        Flow,
        FlowJob,
        FlowResult,
        InvalidFlowError,
        Client,
        ContractChangedError,
        ContractUnavailable,
        ContractViolation,
        Enqueued,
        Event,
        InvalidJobError,
        JSONStringDataWarning,
        Job,
        LayoutRefusedError,
        JobStage,
        LogLine,
        PayloadTooLargeError,
    )
    from ._admin import (
        DeadLetter,
        GroupState,
        InvalidArgumentError,
        QueueControl,
        QueueGroups,
        RateLimit,
        ResourceLimit,
        ResourceState,
        Schedule,
    )

_CLIENT_NAMES = (
    "DEFAULT_ATTEMPTS",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "Cancelled",
    "Flow",
    "FlowJob",
    "FlowResult",
    "InvalidFlowError",
    "Client",
    "ContractChangedError",
    "ContractUnavailable",
    "ContractViolation",
    "Enqueued",
    "Event",
    "InvalidJobError",
    "JSONStringDataWarning",
    "Job",
    "LayoutRefusedError",
    "JobStage",
    "LogLine",
    "PayloadTooLargeError",
)
_ADMIN_NAMES = (
    "DeadLetter",
    "GroupState",
    "InvalidArgumentError",
    "QueueControl",
    "QueueGroups",
    "RateLimit",
    "ResourceLimit",
    "ResourceState",
    "Schedule",
)

__all__ = ["InvalidNameError", *_CLIENT_NAMES, *_ADMIN_NAMES]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The client (and redis-py) load on first use: `from conveyor.handler import serve` stays stdlib-only.
    if name in _CLIENT_NAMES:
        from . import client

        return getattr(client, name)
    if name in _ADMIN_NAMES:
        from . import _admin

        return getattr(_admin, name)
    raise AttributeError(f"module 'conveyor' has no attribute {name!r}")
