"""The layout in force from Python (docs/protocol.md, "The layout in force"): a client that reads
layout 1 only refuses to enqueue into a pipeline finalized past it, naming the layout, the
pipeline and the first version that reads it; against real Redis."""

import asyncio
from typing import Any

import pytest
import redis

from conveyor import Client, LayoutRefusedError
from conveyor.aio import AsyncClient


def test_layout_1_in_force_or_absent_enqueues(client: Client, r: redis.Redis) -> None:
    client.enqueue("lay/a", {"n": 1})
    r.hset("cvy:{lay}:layout", mapping={"inForce": "1"})
    client.enqueue("lay/a", {"n": 2})
    assert r.llen("cvy:{lay}:q:lay/a:line") == 2


def test_a_newer_layout_refuses_the_enqueue_and_writes_nothing(redis_url: str, r: redis.Redis) -> None:
    r.hset("cvy:{ahead}:layout", mapping={"inForce": "3", "firstVersion": "9.9.0"})
    c = Client.from_url(redis_url)
    try:
        with pytest.raises(LayoutRefusedError) as e:
            c.enqueue("ahead/a", {"n": 1})
        assert str(e.value).startswith("pipeline ahead is on layout 3; this Conveyor ")
        assert "reads layouts 1..2: upgrade to 9.9.0 or later, which reads layout 3" in str(e.value)
        assert (e.value.pipeline, e.value.in_force, e.value.first_version) == ("ahead", 3, "9.9.0")
        with pytest.raises(LayoutRefusedError):
            c.enqueue_flow("ahead", [{"key": "a", "queue": "ahead/a", "data": 1}])
        assert r.keys("cvy:{ahead}:q:*") == []
    finally:
        c.close()

    async def main() -> None:
        async with AsyncClient.from_url(redis_url) as ac:
            with pytest.raises(LayoutRefusedError):
                await ac.enqueue("ahead/a", {"n": 1})

    asyncio.run(main())


def test_a_client_that_reads_the_newer_layout_enqueues(redis_url: str, r: redis.Redis, monkeypatch: Any) -> None:
    r.hset("cvy:{ahead}:layout", mapping={"inForce": "3"})
    monkeypatch.setenv("CONVEYOR_LAYOUTS", "1..3")
    c = Client.from_url(redis_url)
    try:
        c.enqueue("ahead/a", {"n": 1})
    finally:
        c.close()
    assert r.llen("cvy:{ahead}:q:ahead/a:line") == 1
