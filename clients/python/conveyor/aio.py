"""The asyncio variant of conveyor.Client (redis.asyncio): the same scripts, arguments, checks
and results, awaited.

    from conveyor.aio import AsyncClient
    client = AsyncClient.from_url("redis://127.0.0.1:6379")
    job_id = await client.enqueue("docs/ocr", {"url": "s3://bucket/scan.pdf"}, priority=5)
    async for event in client.events("docs/ocr"): ...
    await client.close()
"""

from datetime import datetime
from typing import Any, AsyncIterator, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Union

from redis.exceptions import NoScriptError

from . import _admin
from ._admin import (
    UNSET,
    DeadLetter,
    QueueControl,
    QueueGroups,
    RateLimit,
    ResourceLimit,
    ResourceState,
    Schedule,
)
from ._keys import QueueKeys
from .client import (
    CANCELLED_RETENTION_SECONDS,
    DEFAULT_MAX_PAYLOAD_BYTES,
    EVENTS_PAGE,
    Cancelled,
    Duration,
    Enqueued,
    Event,
    Flow,
    FlowResult,
    Job,
    LogLine,
    _block_ms,
    _cancel_op,
    _Contracts,
    _LayoutChecks,
    _counters_op,
    _enqueue_many_op,
    _events,
    _events_after,
    _flow_op,
    _flow_view_op,
    _get_job_op,
    _job_logs_op,
    _one_job,
    _redis_from_url,
    _Script,
    _since,
    _stats_op,
    _wait_flow_op,
    _wait_op,
)


async def _run(script: _Script, client: Any, keys: Sequence[str], args: Sequence[Any]) -> Any:
    try:
        return await client.evalsha(script.sha, len(keys), *keys, *args)
    except NoScriptError:
        return await client.eval(script.source, len(keys), *keys, *args)


class AsyncClient:
    """conveyor.Client for asyncio programs."""

    def __init__(
        self, redis_client: Any, *, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES, refuse_json_strings: bool = False
    ) -> None:
        self.redis = redis_client
        self.max_payload_bytes = max_payload_bytes
        self.refuse_json_strings = refuse_json_strings
        self._cluster = type(redis_client).__name__ == "RedisCluster"
        self._registered: Set[str] = set()
        self._layouts = _LayoutChecks()
        self._contracts = _Contracts()
        self._scripts: Dict[str, _Script] = {}

    async def _drive(self, op: _admin.Op) -> Any:
        """As Client._drive, each Redis call awaited."""
        reply: Any = None
        error: Optional[BaseException] = None
        while True:
            try:
                step = op.throw(error) if error is not None else op.send(reply)
            except StopIteration as done:
                return done.value
            error = None
            try:
                reply = await self._step(step)
            except Exception as err:  # noqa: BLE001 - handed to the operation, which re-raises what it does not expect
                error = err

    async def _step(self, step: _admin.Step) -> Any:
        if isinstance(step, _admin.Script):
            script = self._scripts.get(step.name) or self._scripts.setdefault(step.name, _Script(step.name))
            return await _run(script, self.redis, step.keys, step.args)
        if isinstance(step, _admin.Pipe):
            pipe = self.redis.pipeline(transaction=step.transaction and not self._cluster)
            for call in step.calls:
                getattr(pipe, call.method)(*call.args, **call.kwargs)
            return await pipe.execute(raise_on_error=step.raise_on_error)
        return await getattr(self.redis, step.method)(*step.args, **step.kwargs)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        refuse_json_strings: bool = False,
        **redis_kwargs: Any,
    ) -> "AsyncClient":
        """As Client.from_url."""
        return cls(
            _redis_from_url(url, use_asyncio=True, **redis_kwargs),
            max_payload_bytes=max_payload_bytes,
            refuse_json_strings=refuse_json_strings,
        )

    async def close(self) -> None:
        await self.redis.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def enqueue(
        self,
        queue: str,
        data: Any,
        *,
        id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        priority: Optional[int] = None,
        delay: Optional[Duration] = None,
        attempts: Optional[int] = None,
        timeout: Optional[Duration] = None,
        content_hash: Optional[str] = None,
        trace: Optional[str] = None,
        group: Optional[str] = None,
        dedupe: Optional[Mapping[str, Any]] = None,
        uses: Optional[Mapping[str, Mapping[str, int]]] = None,
        task: Optional[str] = None,
        notify: Optional[Mapping[str, Any]] = None,
    ) -> str:
        """As Client.enqueue."""
        job = _one_job(data, id=id, idempotency_key=idempotency_key, priority=priority, delay=delay,
                       attempts=attempts, timeout=timeout, content_hash=content_hash, trace=trace, group=group,
                       dedupe=dedupe, uses=uses, task=task, notify=notify)
        return (await self.enqueue_many(queue, [job]))[0].id

    async def enqueue_flow(
        self, pipeline: str, jobs: Sequence[Mapping[str, Any]], *, idempotency_key: Optional[str] = None
    ) -> FlowResult:
        """As Client.enqueue_flow."""
        return await self._drive(_flow_op(self, pipeline, jobs, idempotency_key))  # type: ignore[no-any-return]

    async def enqueue_many(self, queue: str, jobs: Iterable[Mapping[str, Any]]) -> List[Enqueued]:
        """As Client.enqueue_many."""
        return await self._drive(_enqueue_many_op(self, queue, jobs))  # type: ignore[no-any-return]

    async def cancel(
        self, job_id: str, queue: Optional[str] = None, *, retention_seconds: int = CANCELLED_RETENTION_SECONDS
    ) -> Cancelled:
        """As Client.cancel."""
        return await self._drive(_cancel_op(job_id, queue, retention_seconds))  # type: ignore[no-any-return]

    async def get_job(self, job_id: str, queue: Optional[str] = None) -> Optional[Job]:
        """As Client.get_job."""
        return await self._drive(_get_job_op(job_id, queue))  # type: ignore[no-any-return]

    async def job_logs(self, job_id: str, queue: Optional[str] = None) -> List[LogLine]:
        """As Client.job_logs."""
        return await self._drive(_job_logs_op(job_id, queue))  # type: ignore[no-any-return]

    async def stats(self, queue: str) -> Dict[str, int]:
        """As Client.stats."""
        return await self._drive(_stats_op(queue))  # type: ignore[no-any-return]

    async def counters(self, queue: str) -> Dict[str, int]:
        return await self._drive(_counters_op(queue))  # type: ignore[no-any-return]

    # -- queue control: as Client's -----------------------------------------------------------

    async def pause(self, queue: str) -> None:
        await self._drive(_admin.pause(queue))

    async def resume(self, queue: str) -> None:
        await self._drive(_admin.resume(queue))

    async def control(self, queue: str) -> QueueControl:
        return await self._drive(_admin.control(queue))  # type: ignore[no-any-return]

    async def set_rate_limit(self, queue: str, rate: Union[str, RateLimit, None]) -> Optional[RateLimit]:
        return await self._drive(_admin.set_rate_limit(queue, rate))  # type: ignore[no-any-return]

    async def rate_limit(self, queue: str) -> Optional[RateLimit]:
        return (await self.control(queue)).rate_limit

    async def remove_rate_limit(self, queue: str) -> None:
        await self.set_rate_limit(queue, None)

    async def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> List[DeadLetter]:
        return await self._drive(_admin.dead_letters(queue, limit, offset))  # type: ignore[no-any-return]

    async def retry_dead(self, queue: str, ids: Optional[Iterable[str]] = None) -> int:
        return await self._drive(_admin.retry_dead(queue, ids))  # type: ignore[no-any-return]

    async def purge_dead(self, queue: str) -> int:
        return await self._drive(_admin.purge_dead(queue))  # type: ignore[no-any-return]

    async def add_schedule(
        self,
        queue: str,
        name: str,
        *,
        every: Optional[Duration] = None,
        cron: Optional[str] = None,
        tz: Optional[str] = None,
        data: Any = None,
        attempts: Optional[int] = None,
    ) -> Schedule:
        return await self._drive(_admin.add_schedule(queue, name, every, cron, tz, data, attempts))  # type: ignore[no-any-return]

    async def schedules(self, queue: str) -> List[Schedule]:
        return await self._drive(_admin.schedules(queue))  # type: ignore[no-any-return]

    async def remove_schedule(self, queue: str, name: str) -> bool:
        return await self._drive(_admin.remove_schedule(queue, name))  # type: ignore[no-any-return]

    async def set_group(
        self,
        queue: str,
        group: Optional[str] = None,
        *,
        concurrency: Optional[int] = UNSET,
        rate: Union[str, RateLimit, None] = UNSET,
        weight: Optional[int] = UNSET,
        on_dead: Optional[str] = UNSET,
    ) -> None:
        await self._drive(_admin.set_group(queue, group, concurrency, rate, weight, on_dead))

    async def limit_group(
        self,
        queue: str,
        group: Optional[str] = None,
        *,
        concurrency: Optional[int] = UNSET,
        rate: Union[str, RateLimit, None] = UNSET,
    ) -> None:
        await self.set_group(queue, group, concurrency=concurrency, rate=rate)

    async def pause_group(self, queue: str, group: str) -> None:
        await self._drive(_admin.pause_group(queue, group, True))

    async def resume_group(self, queue: str, group: str) -> None:
        await self._drive(_admin.pause_group(queue, group, False))

    async def groups(self, queue: str) -> QueueGroups:
        return await self._drive(_admin.groups(queue))  # type: ignore[no-any-return]

    async def set_resource(
        self,
        pipeline: str,
        name: str,
        keys: Mapping[str, Union[str, Sequence[ResourceLimit]]],
        *,
        ceiling: float = _admin.DEFAULT_CEILING,
    ) -> None:
        await self._drive(_admin.set_resource(pipeline, name, keys, ceiling))

    async def resources(self, pipeline: Optional[str] = None) -> List[ResourceState]:
        return await self._drive(_admin.resources(pipeline))  # type: ignore[no-any-return]

    async def remove_resource(self, pipeline: str, name: str) -> bool:
        return await self._drive(_admin.remove_resource(pipeline, name))  # type: ignore[no-any-return]

    async def bench_resource_key(self, pipeline: str, name: str, key: str, until: Union[float, datetime]) -> None:
        await self._drive(_admin.bench_resource_key(pipeline, name, key, until))

    async def wait(self, ids: Iterable[str], timeout: Optional[float] = None, queue: Optional[str] = None) -> Dict[str, Job]:
        """As Client.wait."""
        return await self._drive(_wait_op(ids, timeout, queue))  # type: ignore[no-any-return]

    async def flow(self, flow_id: str, pipeline: Optional[str] = None) -> Optional[Flow]:
        """As Client.flow."""
        return await self._drive(_flow_view_op(flow_id, pipeline))  # type: ignore[no-any-return]

    async def wait_flow(
        self, flow_id: str, timeout: Optional[float] = None, pipeline: Optional[str] = None
    ) -> Optional[Flow]:
        """As Client.wait_flow."""
        return await self._drive(_wait_flow_op(flow_id, timeout, pipeline))  # type: ignore[no-any-return]

    async def events(
        self, queue: str, follow: bool = True, *, since: Optional[str] = None, block: float = 1.0
    ) -> AsyncIterator[Event]:
        """As Client.events (anchored at the first iteration, not at the call)."""
        key = QueueKeys(queue).events
        after = _since(since)
        if not follow:
            start = "-" if after is None else after[0]
            while True:
                entries = await self.redis.xrange(key, start, "+", count=EVENTS_PAGE)
                for event in _events_after(entries, after):
                    yield event
                if len(entries) < EVENTS_PAGE:
                    return
                start = f"({entries[-1][0]}"
        if after is None:
            newest = await self.redis.xrevrange(key, "+", "-", count=1)
            last = newest[0][0] if newest else "0-0"
        else:
            last = after[0]
            for event in _events_after(await self.redis.xrange(key, last, last), after):
                yield event
        while True:
            reply = await self.redis.xread({key: last}, count=EVENTS_PAGE, block=_block_ms(self.redis, block))
            for _, entries in reply or []:
                for event_id, fields in entries:
                    last = event_id
                    for event in _events(event_id, fields):
                        yield event
