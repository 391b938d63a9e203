"""The asyncio variant of conveyor.Client (redis.asyncio): the same scripts, arguments, checks
and results, awaited.

    from conveyor.aio import AsyncClient
    client = AsyncClient.from_url("redis://127.0.0.1:6379")
    job_id = await client.enqueue("docs/ocr", {"url": "s3://bucket/scan.pdf"}, priority=5)
    async for event in client.events("docs/ocr"): ...
    await client.close()
"""

import time
from typing import Any, AsyncIterator, Dict, Iterable, List, Mapping, Optional, Sequence, Set

from redis.exceptions import NoScriptError, ResponseError

from ._keys import PIPELINES_KEY, QUEUES_KEY, PipelineKeys, QueueKeys, check_job_id
from .client import (
    CANCELLED_RETENTION_SECONDS,
    DEFAULT_MAX_PAYLOAD_BYTES,
    Cancelled,
    EVENTS_PAGE,
    Duration,
    Enqueued,
    Event,
    Job,
    LogLine,
    _cancel_call,
    _cancelled,
    BULK_CHUNK,
    CompiledContract,
    ContractChangedError,
    ContractViolation,
    _changed_again,
    _Contracts,
    _LayoutChecks,
    _enqueue_batch,
    _refuse,
    _stored_contract,
    contract_changed,
    _enqueued,
    _events,
    _events_after,
    _since,
    _job,
    _log_lines,
    _one_job,
    _payload_error,
    _pipelines,
    _redis_from_url,
    _Script,
    _stats,
    _budget_groups,
    _block_ms,
    _stats_commands,
    _ended_by,
    _wait_streams,
    WAIT_ENDED,
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
        self._enqueue = _Script("enqueue_jobs")
        self._cancel = _Script("cancel_job")

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
    ) -> str:
        """As Client.enqueue."""
        job = _one_job(data, id=id, idempotency_key=idempotency_key, priority=priority, delay=delay,
                       attempts=attempts, timeout=timeout, content_hash=content_hash, trace=trace, group=group,
                       dedupe=dedupe, uses=uses, task=task)
        return (await self.enqueue_many(queue, [job]))[0].id

    async def enqueue_many(self, queue: str, jobs: Iterable[Mapping[str, Any]]) -> List[Enqueued]:
        """As Client.enqueue_many."""
        batch = _enqueue_batch(queue, jobs, self.max_payload_bytes, self.refuse_json_strings)
        cached = self._contracts.known(queue)
        if cached is not None:
            try:
                _refuse(batch, cached)
            except ContractViolation:
                now = await self._read_contract(queue)
                if now is not None and now.hash == cached.hash:
                    raise
                _refuse(batch, now)
        if self._layouts.due(batch.keys.pipeline):
            self._layouts.read(batch.keys.pipeline, await self.redis.hgetall(PipelineKeys(batch.keys.pipeline).layout))
        if batch.keys.queue not in self._registered:
            await self.redis.sadd(PIPELINES_KEY, batch.keys.pipeline)
            await self.redis.sadd(QUEUES_KEY, batch.keys.queue)
            self._registered.add(batch.keys.queue)
        out: List[Enqueued] = []
        changed = False
        for start in range(0, len(batch.records), BULK_CHUNK):
            while True:
                contract = self._contracts.known(queue)
                try:
                    reply = await _run(
                        self._enqueue, self.redis, batch.key_list, batch.args(start, contract.hash if contract else "")
                    )
                    break
                except ResponseError as err:
                    in_force = contract_changed(err)
                    if in_force is None:
                        raise _payload_error(err) from None
                    if changed:
                        raise ContractChangedError(_changed_again(queue, in_force)) from None
                    changed = True
                    _refuse(batch, await self._read_contract(queue), start)
            out.extend(_enqueued(reply))
        return out

    async def _read_contract(self, queue: str) -> Optional[CompiledContract]:
        reply = await self.redis.hmget(QueueKeys(queue).contract, "hash", "body")
        return self._contracts.store(queue, _stored_contract(reply))

    async def cancel(
        self, job_id: str, queue: Optional[str] = None, *, retention_seconds: int = CANCELLED_RETENTION_SECONDS
    ) -> Cancelled:
        """As Client.cancel."""
        check_job_id(job_id)
        for pipeline in await self._known(queue):
            keys, args = _cancel_call(job_id, pipeline, retention_seconds)
            reply = await _run(self._cancel, self.redis, keys, args)
            if reply[0] != "notFound":
                return _cancelled(job_id, reply)
        return Cancelled(job_id, "notFound", "", "", 0)

    async def _known(self, queue: Optional[str]) -> List[str]:
        return _pipelines(queue, () if queue else await self.redis.smembers(PIPELINES_KEY))

    async def get_job(self, job_id: str, queue: Optional[str] = None) -> Optional[Job]:
        """As Client.get_job."""
        check_job_id(job_id)
        for pipeline in await self._known(queue):
            raw = await self.redis.hgetall(PipelineKeys(pipeline).job(job_id))
            if raw:
                if "data" not in raw and "queue" in raw:
                    parked = await self.redis.get(PipelineKeys(pipeline).data(job_id))
                    if parked is not None:
                        raw["data"] = parked
                return _job(job_id, raw)
        return None

    async def job_logs(self, job_id: str, queue: Optional[str] = None) -> List[LogLine]:
        """As Client.job_logs."""
        check_job_id(job_id)
        for pipeline in await self._known(queue):
            lines = await self.redis.lrange(PipelineKeys(pipeline).logs(job_id), 0, -1)
            if lines:
                return _log_lines(lines)
        return []

    async def stats(self, queue: str) -> Dict[str, int]:
        """As Client.stats."""
        pipe = self.redis.pipeline(transaction=not self._cluster)
        _stats_commands(pipe, queue)
        replies = await pipe.execute()
        waits = _budget_groups(replies)
        return _stats(replies, await self.redis.hmget(QueueKeys(queue).group_waiting, waits) if waits else ())

    async def counters(self, queue: str) -> Dict[str, int]:
        return {name: int(v) for name, v in (await self.redis.hgetall(QueueKeys(queue).counts)).items()}

    async def wait(self, ids: Iterable[str], timeout: Optional[float] = None, queue: Optional[str] = None) -> Dict[str, Job]:
        """As Client.wait."""
        wanted = list(dict.fromkeys(ids))
        for job_id in wanted:
            check_job_id(job_id)
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        pipelines = _pipelines(queue, () if queue else await self.redis.smembers(PIPELINES_KEY))
        # stream positions first, then the records: an end after them is read from the streams
        positions = {k: await self._newest(k) for k in _wait_streams(await self.redis.smembers(QUEUES_KEY), pipelines)}
        out: Dict[str, Job] = {}
        pending = set()
        for job_id in wanted:
            job = await self.get_job(job_id, queue)
            if job is not None:
                out[job_id] = job
                if job.state not in WAIT_ENDED:
                    pending.add(job_id)
        while pending and positions:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            block = min(1.0, left) if left is not None else 1.0
            reply = await self.redis.xread(positions, count=EVENTS_PAGE, block=max(1, int(block * 1000)))
            for key, entries in reply or []:
                for event_id, fields in entries:
                    positions[key] = event_id
                    for e in _events(event_id, fields):
                        if e.id not in pending:
                            continue
                        ended = _ended_by(e)
                        nxt = e.fields.get("next") if e.type == "completed" else None
                        if nxt and QueueKeys(nxt).events not in positions:
                            positions[QueueKeys(nxt).events] = await self._newest(QueueKeys(nxt).events)
                            job = await self.get_job(e.id, queue)
                            ended = job if job is not None and job.state in WAIT_ENDED else None
                        if ended is not None:
                            pending.discard(e.id)
                            out[e.id] = await self.get_job(e.id, queue) or ended
        for job_id in pending:
            job = await self.get_job(job_id, queue)
            if job is not None:
                out[job_id] = job
        return out

    async def _newest(self, key: str) -> str:
        newest = await self.redis.xrevrange(key, "+", "-", count=1)
        return newest[0][0] if newest else "0-0"

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
