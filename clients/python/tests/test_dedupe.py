"""Debounce and throttle from Python (issue 31, docs/protocol.md "Debounce and throttle"):
`enqueue(..., dedupe=...)` writes exactly what the TypeScript producer writes, a debounced burst
is one waiting job with the latest data, a throttled window keeps its first job; against real Redis."""

import json
from typing import Any

import pytest
import redis

from conftest import ts
from conveyor import Client, InvalidJobError
from test_protocol import snapshot

# A throttled pair (the second reports the first), a debounced job and a grouped debounced job
# (the batch then carries the `+dedupe` marker and 11 fields per job) and a plain job.
TS_JOBS = [
    {"id": "t1", "data": 1, "dedupe": {"key": "user:42", "mode": "throttle", "windowMs": 60000}},
    {"id": "t2", "data": 2, "dedupe": {"key": "user:42", "mode": "throttle", "windowMs": 60000}},
    {"id": "d1", "data": {"v": 1}, "dedupe": {"key": "doc-7", "mode": "debounce", "windowMs": 5000}},
    {"id": "d2", "data": 3, "group": "acme", "dedupe": {"key": "g", "mode": "debounce", "windowMs": 2000}},
    {"id": "p1", "data": 4},
]
PY_JOBS = [
    {"id": "t1", "data": 1, "dedupe": {"key": "user:42", "mode": "throttle", "window": 60}},
    {"id": "t2", "data": 2, "dedupe": {"key": "user:42", "mode": "throttle", "window": 60}},
    {"id": "d1", "data": {"v": 1}, "dedupe": {"key": "doc-7", "mode": "debounce", "window": 5}},
    {"id": "d2", "data": 3, "group": "acme", "dedupe": {"key": "g", "mode": "debounce", "window": 2}},
    {"id": "p1", "data": 4},
]


def test_deduplicated_enqueue_writes_what_the_typescript_producer_writes(redis_url: str, r: redis.Redis) -> None:
    ts("enqueue", redis_url, "docs/ocr", json.dumps(TS_JOBS))
    expected = snapshot(r)
    assert expected["cvy:{docs}:q:docs/ocr:dd:user:42"][:2] == ("string", "t1")
    assert "cvy:{docs}:job:t2" not in expected

    r.flushall()
    with Client.from_url(redis_url) as c:
        got = c.enqueue_many("docs/ocr", PY_JOBS)
        assert [(x.id, x.created, x.replaced) for x in got] == [
            ("t1", True, False), ("t1", False, False), ("d1", True, False), ("d2", True, False), ("p1", True, False)]
    assert snapshot(r) == expected


def test_a_debounced_burst_is_one_job_with_the_latest_data(client: Client, r: redis.Redis) -> None:
    ids = [client.enqueue("mail", {"n": n}, dedupe={"key": "k", "mode": "debounce", "window": 30}) for n in range(5)]
    assert len(set(ids)) == 1
    got = client.enqueue_many("mail", [{"data": {"n": 5}, "dedupe": {"key": "k", "mode": "debounce", "window": 30}}])
    assert got[0].replaced and not got[0].created and got[0].id == ids[0]
    assert client.get_job(ids[0]).data == {"n": 5}
    stats = client.stats("mail")
    assert (stats["delayed"], stats["ready"]) == (1, 0)


@pytest.mark.parametrize(
    "dedupe, delay, message",
    [({"key": "k", "mode": "squash", "window": 1}, None, "dedupe.mode must be debounce or throttle"),
     ({"key": "", "mode": "throttle", "window": 1}, None, "dedupe.key must be a string of 1..500"),
     ({"key": "k", "mode": "throttle", "window": 0}, None, "dedupe.window must be 1 ms..7 days"),
     ({"key": "k", "mode": "throttle", "window": 1, "when": 2}, None, "dedupe must be a mapping"),
     ({"key": "k", "mode": "debounce", "window": 1}, 5, "delay must be 0")],
)
def test_bad_dedupe_is_refused_before_redis(client: Client, r: redis.Redis, dedupe: Any, delay: Any, message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        client.enqueue("mail", 1, id="j", dedupe=dedupe, delay=delay)
    assert r.keys("*") == []
