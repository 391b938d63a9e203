"""conveyor.aio.AsyncClient writes what the sync client writes and reads the same, also on a
Redis Cluster."""

import asyncio
from typing import Any

import pytest

from conveyor import InvalidJobError
from conveyor.aio import AsyncClient
from test_protocol import PY_JOBS, snapshot


def test_async_client_writes_what_the_sync_client_writes(redis_url: str, r: Any, client: Any) -> None:
    client.enqueue_many("docs/ocr", PY_JOBS)
    expected = snapshot(r)
    r.flushall()

    async def main() -> None:
        async with AsyncClient.from_url(redis_url) as c:
            got = await c.enqueue_many("docs/ocr", PY_JOBS)
            assert [x.created for x in got] == [True, True, True, True, True, False, True]
            assert snapshot(r) == expected
            assert await c.enqueue("docs/ocr", 1, id="a1") == "a1"
            with pytest.raises(InvalidJobError, match="priority"):
                await c.enqueue("docs/ocr", 1, priority=-1)
            assert (await c.get_job("a4")).state == "delayed"
            assert await c.get_job("nope") is None
            assert (await c.stats("docs/ocr"))["ready"] == 5
            assert (await c.counters("docs/ocr"))["enqueued"] == 6
            history = [e async for e in c.events("docs/ocr", follow=False)]
            assert [e.id for e in history] == ["a1", "a2", "a3", "a4", "a5", "a7"]
            after = [e.id async for e in c.events("docs/ocr", follow=False, since=history[3].cursor)]
            assert after == ["a5", "a7"]
            # A batch entry (docs/protocol.md, Events): the follower resumes inside it.
            sep = "\x1f"
            r.xadd("cvy:{docs}:q:docs/ocr:events", {"type": "started", "n": "2", "queue": "docs/ocr", "at": "1",
                                                    "id[]": sep.join(["a1", "a3"]), "token[]": sep.join(["7", "8"])})
            batch = [e async for e in c.events("docs/ocr", follow=False, since=history[-1].cursor)]
            assert [(e.type, e.id, e.part) for e in batch] == [("started", "a1", 0), ("started", "a3", 1)]
            follower = c.events("docs/ocr", follow=True, since=batch[0].cursor, block=0.1)
            assert (await follower.__anext__()).id == "a3"
            await follower.aclose()
            assert await c.job_logs("a1") == []
            assert (await c.cancel("a2")).outcome == "cancelled" and (await c.get_job("a2")).state == "cancelled"
            assert (await c.cancel("a2")).outcome == "finished" and (await c.cancel("zz")).outcome == "notFound"

    asyncio.run(main())


def test_async_client_on_a_cluster(cluster_url: str) -> None:
    async def main() -> None:
        async with AsyncClient.from_url(cluster_url) as c:
            for p in ("docs", "mail", "scans"):
                await c.enqueue(f"{p}/x", {"p": p}, id=f"aio-{p}")
            assert (await c.get_job("aio-mail")).data == {"p": "mail"}
            assert (await c.stats("scans/x"))["ready"] >= 1

    asyncio.run(main())
