"""The Python client on its own: argument checks, reads (get_job, stats, events, job_logs) and
Redis Cluster URLs, against real Redis."""

import json
import math
import threading
from datetime import timedelta
from typing import Any, List

import pytest
import redis

from conftest import HERE, PYTHON, wait_for
from conveyor import Client, InvalidJobError, InvalidNameError, PayloadTooLargeError


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"priority": 1001}, "priority must be an integer 0..1000"),
        ({"priority": 1.5}, "priority must be an integer 0..1000"),
        ({"priority": True}, "priority must be an integer 0..1000"),
        ({"attempts": 0}, "attempts must be an integer 1..1000"),
        ({"attempts": 1001}, "attempts must be an integer 1..1000"),
        ({"delay": -1}, "delay must be a number of seconds"),
        ({"timeout": math.inf}, "timeout must be a number of seconds"),
        ({"idempotency_key": 5}, "idempotency_key, content_hash and trace must be strings"),
        ({"trace": b"00-"}, "idempotency_key, content_hash and trace must be strings"),
    ],
)
def test_bad_options_are_refused_before_redis(client: Client, r: Any, kwargs: Any, message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        client.enqueue("mail", {"to": "a"}, **kwargs)
    assert r.keys("*") == []


def test_bad_names_data_and_sizes(client: Client, r: Any) -> None:
    for queue in ("", "-mail", "a/b/c", "docs/", "x" * 101, "sp ace"):
        with pytest.raises(InvalidNameError, match="invalid queue name"):
            client.enqueue(queue, 1)
    for job_id in ("", ":a", "a b", "x" * 201):
        with pytest.raises(InvalidNameError, match="invalid job id"):
            client.enqueue("mail", 1, id=job_id)
    for data in ({1, 2}, object(), math.nan, {"a": math.inf}):
        with pytest.raises(InvalidJobError, match="data is not JSON-serializable"):
            client.enqueue("mail", data)
    with pytest.raises(InvalidJobError, match="unknown option"):
        client.enqueue_many("mail", [{"data": 1, "prio": 3}])
    with pytest.raises(PayloadTooLargeError, match="limit 524288"):
        client.enqueue("mail", "x" * (512 * 1024))
    # one bad job refuses the whole batch before anything is written
    with pytest.raises(InvalidJobError):
        client.enqueue_many("mail", [{"data": 1}, {"data": 2, "attempts": 0}])
    assert r.keys("*") == []
    client.enqueue("mail", "x" * (512 * 1024 - 2))  # exactly at the limit (with its quotes)


def test_the_script_enforces_the_limit_it_is_given(r: Any) -> None:
    """enqueue_jobs refuses data longer than its max-payload-bytes argument (docs/protocol.md)."""
    from conveyor.client import _Script

    q = "cvy:{mail}:q:mail:"
    keys = [q + "ready", q + "delayed", q + "counts", q + "wake", "cvy:{mail}:outbox", "cvy:{mail}:meta", "cvy:{mail}:seq",
            q + "contract"]
    record = json.dumps({"jobPrefix": "cvy:{mail}:job:", "idempotencyPrefix": q + "idem:", "queue": "mail", "now": 1,
                         "maxPayloadBytes": 10, "idempotencyTtlSeconds": 86400, "jobFields": ["id", "data", "attempts"]})
    args = [record, "big", '"' + "x" * 100 + '"', 3]
    with pytest.raises(Exception, match="ERR_PAYLOAD_TOO_LARGE job big is 102 bytes, limit 10"):
        _Script("enqueue_jobs")(r, keys, args)
    assert r.exists("cvy:{mail}:job:big") == 0
    # A call without the 8th key (<Q>contract) is refused by name.
    with pytest.raises(Exception, match="ERR_INVALID_RECORD enqueue_jobs call: 8 KEYS wanted, the 8th <Q>contract, got 7"):
        _Script("enqueue_jobs")(r, keys[:7], args)
    # The positional call of the release before the call record is refused naming the record.
    with pytest.raises(Exception, match="ERR_INVALID_RECORD enqueue_jobs call is not a JSON object"):
        _Script("enqueue_jobs")(r, keys, ["cvy:{mail}:job:", q + "idem:", "mail", 1, 10, 86400, "id,data", "", "a", "1"])
    assert r.keys("*") == []


def test_reads(client: Client) -> None:
    first = client.enqueue("docs/ocr", {"n": 1}, id="r1", priority=3, delay=timedelta(minutes=1), timeout=30)
    assert first == "r1"
    assert client.enqueue("docs/ocr", {"n": 1}, id="r1") == "r1"  # an existing id: a no-op
    client.enqueue("docs/ocr", {"n": 2}, id="r2")
    job = client.get_job("r1")
    assert (job.state, job.data, job.priority, job.attempts, job.raw["timeout"]) == ("delayed", {"n": 1}, 3, 3, "30000")
    assert client.get_job("r1", "docs/embed").id == "r1" and client.get_job("nope") is None
    stats = client.stats("docs/ocr")
    assert stats == {"ready": 1, "delayed": 1, "dueDelayed": 0, "inflight": 0, "dead": 0, "completed": 0, "backlog": 1}
    assert client.counters("docs/ocr") == {"enqueued": 2}
    history = list(client.events("docs/ocr", follow=False))
    assert [(e.type, e.id) for e in history] == [("enqueued", "r1"), ("enqueued", "r2")]
    assert int(history[0].fields["due"]) == history[0].at + 60000
    assert [e.id for e in client.events("docs/ocr", follow=False, since=history[0].event_id)] == ["r2"]
    assert client.job_logs("r1") == []
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    client.enqueue("docs/ocr", 3, id="r3", trace=parent)
    assert client.get_job("r3").raw["trace"] == parent and "trace" not in client.get_job("r2").raw


def test_events_expand_batch_entries(client: Client, r: Any) -> None:
    # The documented batch form (docs/protocol.md, Events): one entry, n jobs, `x[]` lists
    # joined by U+001F; a per-job entry after it reads as before.
    key = "cvy:{mail}:q:mail:events"
    sep = "\x1f"
    r.xadd(key, {"type": "completed", "n": "2", "queue": "mail", "at": "1700000000050",
                 "id[]": sep.join(["a", "c"]), "token[]": sep.join(["41", "43"]),
                 "result[]": sep.join(['{"n":1}', '"C"']), "reused[]": sep.join(["0", "1"])})
    r.xadd(key, {"type": "started", "id": "d", "queue": "mail", "at": "1700000000060", "token": "44"})
    events = list(client.events("mail", follow=False))
    assert [(e.type, e.id, e.part, e.fields.get("token"), e.fields.get("result"), e.fields.get("reused"))
            for e in events] == [
        ("completed", "a", 0, "41", '{"n":1}', "0"),
        ("completed", "c", 1, "43", '"C"', "1"),
        ("started", "d", 0, "44", None, None),
    ]
    assert events[0].event_id == events[1].event_id and events[0].at == 1700000000050
    assert "n" not in events[0].fields and "id[]" not in events[0].fields
    # A cursor resumes inside the batch entry, in the history and when following.
    assert [e.cursor for e in events] == [events[0].event_id, events[0].event_id + "/1", events[2].event_id]
    ids_after = lambda since: [e.id for e in client.events("mail", follow=False, since=since)]  # noqa: E731
    assert ids_after(events[0].cursor) == ["c", "d"]
    assert ids_after(events[1].cursor) == ["d"]
    assert ids_after(events[2].cursor) == []
    followed = client.events("mail", follow=True, since=events[0].cursor, block=0.1)
    assert [next(followed).id, next(followed).id] == ["c", "d"]
    with pytest.raises(ValueError, match="since: expected an event cursor"):
        list(client.events("mail", follow=False, since="yesterday"))


def test_events_follow_sees_new_transitions(client: Client, redis_url: str) -> None:
    seen: List[str] = []
    ready = threading.Event()

    def follow() -> None:
        with Client.from_url(redis_url) as c:
            stream = c.events("mail", follow=True, block=0.2)
            ready.set()
            for event in stream:
                seen.append(f"{event.type}:{event.id}")
                if len(seen) == 2:
                    return

    client.enqueue("mail", 0, id="old")  # before following: not seen
    t = threading.Thread(target=follow, daemon=True)
    t.start()
    ready.wait(10)
    client.enqueue_many("mail", [{"data": 1, "id": "n1"}, {"data": 2, "id": "n2"}])
    t.join(30)
    assert seen == ["enqueued:n1", "enqueued:n2"]


def test_redis_cluster_url(cluster_url: str, start_worker: Any) -> None:
    with Client.from_url(cluster_url) as c:
        c.redis.flushall()
        ids = [c.enqueue(f"{p}/ocr", {"mode": "ok", "steps": 1}, id=f"{p}-1") for p in ("docs", "mail", "scans", "x")]
        assert len({c.redis.keyslot(f"cvy:{{{p}}}:job:x") for p in ("docs", "mail", "scans", "x")}) == 4
        assert c.get_job("mail-1").state == "ready" and c.stats("scans/ocr")["ready"] == 1
        handler = "command:" + json.dumps([PYTHON, str(HERE / "command_handler.py")])
        start_worker("mail/ocr", handler, None, redis=cluster_url)
        job = wait_for("completed on the cluster", lambda: (j := c.get_job("mail-1")) and j.state == "completed" and j)
        assert job.result["double"] == 0 and [line.message for line in c.job_logs("mail-1")] == ["step 1 of 1"]
        assert len(ids) == 4


def test_redis_sentinel_url_follows_a_failover(sentinel_set: Any) -> None:
    with pytest.raises(ValueError, match="names the primary"):
        Client.from_url("redis-sentinel://127.0.0.1:1")
    with pytest.raises(ValueError, match="sentinelAuth=maybe"):
        Client.from_url("redis-sentinel://127.0.0.1:1/m?sentinelAuth=maybe")
    with Client.from_url(sentinel_set.url) as c:
        c.enqueue("sentinel/work", {"n": 1}, id="before")
        assert c.get_job("before").state == "ready"
        redis.Redis(port=sentinel_set.primary_port()).execute_command("WAIT", 1, 5000)
        old = sentinel_set.primary_port()
        sentinel_set.primary.kill()
        sentinel_set.primary.wait(10)
        wait_for("a replica promoted", lambda: sentinel_set.primary_port() != old, 60, 0.2)

        def enqueued() -> bool:
            c.enqueue("sentinel/work", {"n": 2}, id="after")
            return True

        wait_for("an enqueue on the new primary", enqueued, 60, 0.2)
        assert c.get_job("before").state == "ready" and c.get_job("after").state == "ready"


def test_get_job_counts_every_attempt_and_gives_each_stage(client: Client, start_worker: Any) -> None:
    # Real workers; stage a fails its first attempt, then hands {"from": "a"} to stage b.
    from conftest import REPO

    handler = f"module:{REPO / 'test' / 'fixtures' / 'recordingHandler.js'}"
    start_worker("py/a", handler, None, "--next-queue", "py/b")
    start_worker("py/b", handler)
    client.enqueue("py/a", {"failTimes": 1, "result": {"from": "a"}}, id="staged", attempts=3)
    client.enqueue("py/b", {"failTimes": 1}, id="flaky", attempts=3)

    def done(job_id: str) -> Any:
        job = client.get_job(job_id)
        return job if job and job.state == "completed" and job.queue == "py/b" else None

    flaky = wait_for("flaky completed", lambda: done("flaky"))
    assert (flaky.attempts_made, flaky.error) == (2, None), "failed once, then succeeded"
    assert [h["message"] for h in json.loads(flaky.raw["errors"])] == ["planned failure 1"]
    assert [(s.queue, s.state, s.attempts, s.result, s.error) for s in flaky.stages] == [
        ("py/b", "completed", 2, {"ok": "flaky", "attempt": 2}, None)
    ]

    staged = wait_for("staged completed", lambda: done("staged"))
    assert (staged.attempts_made, staged.error) == (1, None), "the counters are the last stage's"
    assert [(s.queue, s.state, s.attempts, s.result, s.error) for s in staged.stages] == [
        ("py/a", "completed", 2, None, None),  # its result is in the records, not in Redis
        ("py/b", "completed", 1, {"ok": "staged", "attempt": 1}, None),
    ]
    assert staged.stages[-1].finished_at and staged.stages[-1].started_at
