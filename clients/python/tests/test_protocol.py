"""Issue 19's conformance test: a producer built only from the published scripts and the
documented arguments (this package, and the plain-commands recipe of docs/protocol.md) writes
exactly the Redis records the TypeScript producer writes for the same calls."""

import json
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
import redis

from conftest import CONVEYOR, REPO, node, ts

# One call of each kind, in the TypeScript producer's option names; the Python calls below are
# the same jobs in the Python client's names (seconds for delay/timeout).
TS_JOBS: List[Dict[str, Any]] = [
    {"id": "a1", "data": {"url": "s3://bucket/scan.pdf", "pages": [1, 2.5, 1.0, 1e-7, 0.00001, 1e21, -0.0]}},
    {"id": "a2", "data": "ünïcode ✓ \n\t\"quoted\" \u0001", "priority": 7},
    {"id": "a3", "data": [None, True, False, {}], "priority": 1000, "attempts": 1},
    {"id": "a4", "data": {"k": 1}, "delayMs": 60000, "timeoutMs": 2500},
    {"id": "a5", "data": {"k": 2}, "idempotencyKey": "scan.pdf", "contentHash": "sha256:ab"},
    {"id": "a6", "data": {"k": 3}, "idempotencyKey": "scan.pdf"},  # a duplicate: nothing written
    {"id": "a7", "data": 0, "attempts": 1000, "timeoutMs": 1500.4},
]
PY_JOBS: List[Dict[str, Any]] = [
    {"id": "a1", "data": {"url": "s3://bucket/scan.pdf", "pages": [1, 2.5, 1.0, 1e-7, 0.00001, 1e21, -0.0]}},
    {"id": "a2", "data": "ünïcode ✓ \n\t\"quoted\" \u0001", "priority": 7},
    {"id": "a3", "data": [None, True, False, {}], "priority": 1000, "attempts": 1},
    {"id": "a4", "data": {"k": 1}, "delay": 60, "timeout": 2.5},
    {"id": "a5", "data": {"k": 2}, "idempotency_key": "scan.pdf", "content_hash": "sha256:ab"},
    {"id": "a6", "data": {"k": 3}, "idempotency_key": "scan.pdf"},
    {"id": "a7", "data": 0, "attempts": 1000, "timeout": 1.5004},
]


def snapshot(r: redis.Redis) -> Dict[str, Any]:
    """Every key and its content, with the producer's clock taken out: times become offsets
    from the job's createdAt (or dropped where they only say when), stream ids are dropped."""
    created = {}
    for key in r.scan_iter("*:job:*"):
        created[key.rsplit(":", 1)[1]] = int(r.hget(key, "createdAt"))
    out: Dict[str, Any] = {}
    for key in sorted(r.scan_iter("*")):
        kind = r.type(key)
        if kind == "hash":
            v = r.hgetall(key)
            if "createdAt" in v:
                v["createdAt"] = "<now>"
            out[key] = (kind, v)
        elif kind == "zset":
            members = r.zrange(key, 0, -1, withscores=True)
            if key.endswith(":delayed"):
                members = [(m, s - created[m]) for m, s in members]
            out[key] = (kind, members)
        elif kind == "stream":
            entries = []
            for _, f in r.xrange(key):
                f = dict(f)
                at = int(f.pop("at"))
                if "due" in f:
                    f["due"] = f"<at + {int(f['due']) - at}>"
                entries.append(f)
            out[key] = (kind, entries)
        elif kind == "string":
            out[key] = (kind, r.get(key), r.ttl(key) > 0)
        elif kind == "set":
            out[key] = (kind, sorted(r.smembers(key)))
        elif kind == "list":
            out[key] = (kind, r.lrange(key, 0, -1))
    return out


def test_client_resolves_the_scripts_as_the_typescript_side_does(tmp_path: Path) -> None:
    # the client resolves queue/scripts itself (setup.py writes the same text into a built package);
    # `conveyor scripts dump` is what the worker runs
    from conveyor import _scripts

    assert _scripts.CHECKOUT_SCRIPTS == REPO / "queue" / "scripts"
    node(CONVEYOR, "scripts", "dump", str(tmp_path))
    # (library.lua beside them is the Redis Function library the TypeScript clients load, not a script)
    published = sorted(p.stem for p in tmp_path.glob("*.lua") if p.name != "library.lua")
    assert (tmp_path / "library.lua").read_text(encoding="utf-8").startswith("#!lua name=conveyor_")
    assert _scripts.script_names(_scripts.CHECKOUT_SCRIPTS) == published
    for name in published:
        assert _scripts.script_source(name) == (tmp_path / f"{name}.lua").read_text(encoding="utf-8"), name


@pytest.mark.parametrize("records", [False, True], ids=["outbox-off", "outbox-on"])
def test_python_producer_writes_what_the_typescript_producer_writes(
    redis_url: str, r: redis.Redis, records: bool
) -> None:
    from conveyor import Client

    def prepare() -> None:
        r.flushall()
        if records:  # a recorder switched the outbox on: the enqueue entries go there too
            r.hset("cvy:{docs}:meta", "records", "1")

    prepare()
    replies = ts("enqueue", redis_url, "docs/ocr", json.dumps(TS_JOBS))
    assert [x["created"] for x in replies] == [True, True, True, True, True, False, True]
    expected = snapshot(r)

    prepare()
    with Client.from_url(redis_url) as c:
        got = c.enqueue_many("docs/ocr", PY_JOBS)
    assert [(x.id, x.created) for x in got] == [(x["id"], x["created"]) for x in replies]
    assert snapshot(r) == expected
    assert ("cvy:{docs}:outbox" in expected) == records


def test_plain_commands_recipe_of_the_docs_writes_the_same_record(redis_url: str, r: redis.Redis) -> None:
    """The "With plain commands" recipe of docs/protocol.md, command for command."""
    r.flushall()
    ts("enqueue", redis_url, "docs/ocr", json.dumps([{"id": "j1", "data": {"n": 1}, "priority": 5}]))
    ts("enqueue", redis_url, "docs/ocr", json.dumps([{"id": "j2", "data": {"n": 2}, "priority": 5}]))
    expected = snapshot(r)

    r.flushall()
    ts("enqueue", redis_url, "docs/ocr", json.dumps([{"id": "j1", "data": {"n": 1}, "priority": 5}]))
    # -- the recipe (queue docs/ocr: P = cvy:{docs}:, Q = cvy:{docs}:q:docs/ocr:) --
    P, Q = "cvy:{docs}:", "cvy:{docs}:q:docs/ocr:"
    job_id, data, priority, attempts, now = "j2", '{"n":2}', 5, 3, int(time.time() * 1000)
    seq = r.incr(P + "seq")
    score = (1000 - priority) * 4398046511104 + seq
    records_on = r.hget(P + "meta", "records") == "1"
    tx = r.pipeline(transaction=True)
    tx.hset(P + "job:" + job_id, mapping={
        "queue": "docs/ocr", "data": data, "score": score, "attempts": attempts, "createdAt": now,
        "state": "ready", "priority": priority,
    })
    tx.zadd(Q + "ready", {job_id: score})
    tx.hincrby(Q + "counts", "enqueued", 1)
    event = {"type": "enqueued", "id": job_id, "queue": "docs/ocr", "at": now, "attempts": attempts}
    tx.xadd(Q + "events", event, maxlen=10000, approximate=True)
    if records_on:
        tx.xadd(P + "outbox", {**event, "data": data}, maxlen=1000000, approximate=True)
    tx.lpush(Q + "wake", 1)
    tx.ltrim(Q + "wake", 0, 0)
    tx.execute()
    r.sadd("cvy:pipelines", "docs")
    # -- end of the recipe --
    assert snapshot(r) == expected


def test_priorities_and_fifo_interleave_across_languages(redis_url: str, client: Any, r: redis.Redis) -> None:
    ts("enqueue", redis_url, "mail", json.dumps([{"id": "t-low", "data": 1}, {"id": "t-high", "data": 1, "priority": 9}]))
    client.enqueue("mail", 1, id="p-low")
    client.enqueue("mail", 1, id="p-high", priority=9)
    ts("enqueue", redis_url, "mail", json.dumps([{"id": "t-low2", "data": 1}]))
    # prioritised jobs in the sorted set, priority 0 in the line (docs/protocol.md, "Ready jobs")
    assert r.zrange("cvy:{mail}:q:mail:ready", 0, -1) == ["t-high", "p-high"]
    assert r.lrange("cvy:{mail}:q:mail:line", 0, -1) == ["t-low", "p-low", "t-low2"]


def test_idempotency_keys_are_shared_across_languages(redis_url: str, client: Any) -> None:
    first = client.enqueue("mail", {"to": "a"}, idempotency_key="order-1")
    again = ts("enqueue", redis_url, "mail", json.dumps([{"data": {"to": "b"}, "idempotencyKey": "order-1"}]))
    assert again == [{"id": first, "created": False}]
    ts_id = ts("enqueue", redis_url, "mail", json.dumps([{"data": 1, "idempotencyKey": "order-2"}]))[0]["id"]
    assert client.enqueue("mail", 2, idempotency_key="order-2") == ts_id
    assert client.enqueue_many("mail", [{"data": 2, "idempotency_key": "order-2"}])[0].created is False
    assert client.stats("mail")["ready"] == 2


def test_docs_state_the_defaults_the_code_uses() -> None:
    """The numbers docs/protocol.md promises are the ones both producers use."""
    import conveyor
    from conveyor import _keys

    doc = (REPO / "docs" / "protocol.md").read_text()
    producer_ts = (REPO / "queue" / "producer.ts").read_text()
    key_table = (REPO / "queue" / "keyTable.ts").read_text()  # TypeScript's, the CRD's and Python's source
    assert "512 KiB" in doc and "DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024" in producer_ts
    assert conveyor.DEFAULT_MAX_PAYLOAD_BYTES == 512 * 1024
    assert "DEFAULT_ATTEMPTS = 3" in producer_ts and conveyor.DEFAULT_ATTEMPTS == 3
    for pattern in (_keys.QUEUE_NAME.pattern, _keys.JOB_ID.pattern):
        assert f"`{pattern}`" in doc, pattern
        assert f'"{pattern}"' in key_table
