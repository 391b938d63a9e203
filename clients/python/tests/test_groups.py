"""Groups from Python (issue 31, docs/protocol.md "Groups"): `enqueue(..., group=...)` writes
exactly what the TypeScript producer writes for a grouped job, and `stats` counts grouped
waiting jobs as the TypeScript admin does, against real Redis."""

import asyncio
import json
from typing import Any

import pytest
import redis

from conftest import CONVEYOR, node, ts
from conveyor import Client, InvalidJobError
from conveyor.aio import AsyncClient
from test_protocol import snapshot

# Grouped and ungrouped jobs in one batch (the batch then carries the `+group` marker, the
# ungrouped jobs '' as their group), a prioritised and a delayed grouped job.
TS_JOBS = [
    {"id": "g1", "data": {"n": 1}, "group": "acme"},
    {"id": "g2", "data": {"n": 2}},
    {"id": "g3", "data": {"n": 3}, "group": "acme", "priority": 5},
    {"id": "g4", "data": {"n": 4}, "group": "globex"},
    {"id": "g5", "data": {"n": 5}, "group": "ünï ✓", "delayMs": 60000},
]
PY_JOBS = [
    {"id": "g1", "data": {"n": 1}, "group": "acme"},
    {"id": "g2", "data": {"n": 2}},
    {"id": "g3", "data": {"n": 3}, "group": "acme", "priority": 5},
    {"id": "g4", "data": {"n": 4}, "group": "globex"},
    {"id": "g5", "data": {"n": 5}, "group": "ünï ✓", "delay": 60},
]


def test_grouped_enqueue_writes_what_the_typescript_producer_writes(redis_url: str, r: redis.Redis) -> None:
    ts("enqueue", redis_url, "docs/ocr", json.dumps(TS_JOBS))
    expected = snapshot(r)
    assert expected["cvy:{docs}:q:docs/ocr:g:acme:line"] == ("list", ["g1"])
    assert expected["cvy:{docs}:q:docs/ocr:gwaiting"][1] == {"": "3", "acme": "2", "globex": "1"}

    r.flushall()
    with Client.from_url(redis_url) as c:
        got = c.enqueue_many("docs/ocr", PY_JOBS)
        assert [x.created for x in got] == [True] * 5
        assert c.get_job("g1").raw["group"] == "acme" and "group" not in c.get_job("g2").raw
    assert snapshot(r) == expected


def test_a_batch_without_groups_is_sent_as_before(client: Client, r: redis.Redis) -> None:
    client.enqueue("mail", 1, id="plain")
    assert not [k for k in r.scan_iter("*") if ":g" in k.rsplit(":", 1)[-1] or ":g:" in k]
    assert r.lrange("cvy:{mail}:q:mail:line", 0, -1) == ["plain"]


@pytest.mark.parametrize(
    "group, message",
    [("", "group must be a non-empty string"), (5, "group must be a non-empty string"),
     ("é" * 65, "group is 130 bytes, limit 128")],
)
def test_bad_groups_are_refused_before_redis(client: Client, r: redis.Redis, group: Any, message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        client.enqueue("mail", 1, id="j", group=group)
    assert r.keys("*") == []
    client.enqueue("mail", 1, id="ok", group="x" * 128)  # exactly at the limit


def test_stats_count_grouped_waiting_jobs(redis_url: str, client: Client) -> None:
    client.enqueue("docs/ocr", 1, group="acme")
    client.enqueue("docs/ocr", 2, group="acme", priority=3)
    client.enqueue("docs/ocr", 3, group="globex")
    client.enqueue("docs/ocr", 4)
    stats = client.stats("docs/ocr")
    assert (stats["ready"], stats["backlog"]) == (4, 4)
    # the same figures as `conveyor stats --json` (QueueAdmin, backlog_counts)
    out = json.loads(node(CONVEYOR, "stats", "docs/ocr", "--json", "--redis", redis_url))
    assert out["ready"] == stats["ready"]


def test_async_client_enqueues_grouped_jobs(redis_url: str, r: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncClient.from_url(redis_url) as c:
            await c.enqueue("mail", 1, id="a1", group="acme")
            assert (await c.stats("mail"))["ready"] == 1

    asyncio.run(main())
    assert r.lrange("cvy:{mail}:q:mail:g:acme:line", 0, -1) == ["a1"]
