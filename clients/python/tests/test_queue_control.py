"""Queue control from Python beside the TypeScript side, against real Redis and real workers:
pause/resume, rate limits, dead letters, schedules, groups and resources. What Python writes,
`conveyor …` (the CLI) reads, and the reverse; where both write, Redis holds the same."""

import asyncio
import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

import pytest
import redis

from conftest import HERE, PYTHON, cli, ts, wait_for
from conveyor import Client, InvalidArgumentError, RateLimit, ResourceLimit
from conveyor._cron import next_run
from conveyor.aio import AsyncClient

HANDLER = "command:" + json.dumps([PYTHON, str(HERE / "command_handler.py")])


def conveyor(url: str, *args: str) -> Any:
    """`conveyor <args> --json`, parsed."""
    out = cli(url, *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def control_snapshot(r: redis.Redis, queue: str) -> Dict[str, Any]:
    """The queue's meta hash, wake list and control events (without their times)."""
    pipeline = queue.split("/")[0]
    events = [{k: v for k, v in f.items() if k != "at"} for _, f in r.xrange(f"cvy:{{{pipeline}}}:q:{queue}:events")]
    return {"meta": r.hgetall(f"cvy:{{{pipeline}}}:meta"), "wake": r.lrange(f"cvy:{{{pipeline}}}:q:{queue}:wake", 0, -1),
            "events": events}


# -- pause, resume, rate limits ----------------------------------------------------------------



def claim_polls(port: int, queue: str) -> int:
    """The worker's claim calls so far for `queue` (its conveyor_claim_polls_total metric)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as res:
        text = res.read().decode()
    m = re.search(r'^conveyor_claim_polls_total\{[^}]*queue="' + re.escape(queue) + r'"[^}]*\} (\d+)', text, re.M)
    return int(m.group(1)) if m else 0

def test_a_rate_limit_set_on_one_side_is_read_on_the_other(client: Client, r: redis.Redis, redis_url: str) -> None:
    assert client.set_rate_limit("docs/ocr", "20/s") == RateLimit(20, 1000)
    assert conveyor(redis_url, "stats", "docs/ocr")["rateLimit"] == "20/s"
    client.remove_rate_limit("docs/ocr")
    assert conveyor(redis_url, "stats", "docs/ocr")["rateLimit"] is None
    python_side = control_snapshot(r, "docs/ocr")

    r.flushall()
    conveyor(redis_url, "limit", "docs/ocr", "20/s")
    conveyor(redis_url, "limit", "docs/ocr", "off")
    assert control_snapshot(r, "docs/ocr") == python_side
    assert [e["type"] for e in python_side["events"]] == ["rateLimit", "rateLimit"]

    conveyor(redis_url, "limit", "docs/ocr", "100/m")
    assert str(client.rate_limit("docs/ocr")) == "100/m"
    assert client.control("docs/ocr") == (False, RateLimit(100, 60_000))


def test_pause_from_python_stops_a_real_worker_until_resume(
    client: Client, r: redis.Redis, redis_url: str, start_worker: Any
) -> None:
    worker = start_worker("pz/work", HANDLER)
    client.pause("pz/work")
    assert conveyor(redis_url, "stats", "pz/work")["paused"] is True
    assert client.control("pz/work").paused

    def polls() -> int:
        return claim_polls(worker.port, "pz/work")

    client.enqueue("pz/work", {"mode": "ok", "steps": 1}, id="held")
    after_enqueue = polls()
    # a claim sent after the enqueue found the job and left it: the queue is paused
    wait_for("a claim poll after the enqueue", lambda: polls() > after_enqueue)
    assert client.get_job("held").state == "ready" and client.counters("pz/work").get("started", 0) == 0

    client.resume("pz/work")
    assert conveyor(redis_url, "stats", "pz/work")["paused"] is False
    assert client.wait(["held"], timeout=60)["held"].state == "completed"


def test_pause_at_layout_2_holds_a_real_worker_and_keeps_the_fence(
    client: Client, r: redis.Redis, redis_url: str, start_worker: Any
) -> None:
    # At layout 2 `paused:<queue>` is the fence against the release before layouts; the pause of
    # this release is `hold:<queue>` (docs/protocol.md, "The layout in force").
    fin = cli(redis_url, "layout", "finalize", "pz2", "--json")
    assert fin.returncode == 0, fin.stderr
    assert json.loads(fin.stdout)["to"] == 2
    client.enqueue("pz2/work", {"mode": "ok", "steps": 1}, id="first")
    assert r.hget("cvy:{pz2}:meta", "paused:pz2/work") == "1"
    assert client.control("pz2/work").paused is False
    worker = start_worker("pz2/work", HANDLER)
    assert client.wait(["first"], timeout=60)["first"].state == "completed"

    client.pause("pz2/work")
    assert r.hget("cvy:{pz2}:meta", "hold:pz2/work") == "1"
    assert conveyor(redis_url, "stats", "pz2/work")["paused"] is True
    assert client.control("pz2/work").paused

    def polls() -> int:
        return claim_polls(worker.port, "pz2/work")

    client.enqueue("pz2/work", {"mode": "ok", "steps": 1}, id="held2")
    after_enqueue = polls()
    wait_for("a claim poll after the enqueue", lambda: polls() > after_enqueue)
    assert client.get_job("held2").state == "ready"

    client.resume("pz2/work")
    assert r.hget("cvy:{pz2}:meta", "paused:pz2/work") == "1", "the fence stays"
    assert conveyor(redis_url, "stats", "pz2/work")["paused"] is False
    assert client.wait(["held2"], timeout=60)["held2"].state == "completed"


def test_pause_and_resume_write_what_the_cli_writes(client: Client, r: redis.Redis, redis_url: str) -> None:
    client.pause("docs/ocr")
    client.resume("docs/ocr")
    python_side = control_snapshot(r, "docs/ocr")
    r.flushall()
    conveyor(redis_url, "pause", "docs/ocr")
    assert client.control("docs/ocr").paused
    conveyor(redis_url, "resume", "docs/ocr")
    assert control_snapshot(r, "docs/ocr") == python_side
    assert [e["type"] for e in python_side["events"]] == ["paused", "resumed"]


# -- dead letters ------------------------------------------------------------------------------


def _dead_json(client: Client, queue: str, **page: int) -> List[Dict[str, Any]]:
    """Client.dead_letters in `conveyor dlq list --json`'s shape."""
    return [{"id": d.id, "deadAt": d.dead_at, "reason": d.reason, "attemptsMade": d.attempts_made,
             **({"error": d.error} if d.error is not None else {})} for d in client.dead_letters(queue, **page)]


def test_dead_letters_are_listed_retried_and_purged(
    client: Client, redis_url: str, start_worker: Any, tmp_path: Path
) -> None:
    flag = tmp_path / "flag"
    flag.write_text("up")
    start_worker("dl/work", HANDLER)
    ids = ["d1", "d2", "d3"]
    for i in ids:
        client.enqueue("dl/work", {"mode": "fail-while", "flag": str(flag)}, id=i, attempts=1)
    wait_for("three dead letters", lambda: client.stats("dl/work")["dead"] == 3)
    listed = _dead_json(client, "dl/work")
    assert listed == conveyor(redis_url, "dlq", "list", "dl/work")
    assert sorted(d["id"] for d in listed) == ids and all("the flag is up" in d["reason"] for d in listed)
    assert _dead_json(client, "dl/work", limit=2, offset=1) == listed[1:]
    assert client.dead_letters("dl/work", offset=3) == []

    flag.unlink()
    assert client.retry_dead("dl/work", ["d1", "not-dead"]) == 1
    assert client.wait(["d1"], timeout=60)["d1"].state == "completed"
    assert client.purge_dead("dl/work") == 2
    assert conveyor(redis_url, "dlq", "list", "dl/work") == []

    flag.write_text("up")
    for i in ("e1", "e2"):
        client.enqueue("dl/work", {"mode": "fail-while", "flag": str(flag)}, id=i, attempts=1)
    wait_for("two dead letters", lambda: client.stats("dl/work")["dead"] == 2)
    flag.unlink()
    assert client.retry_dead("dl/work") == 2
    assert {i: j.state for i, j in client.wait(["e1", "e2"], timeout=60).items()} == {"e1": "completed", "e2": "completed"}


def test_a_dead_letter_whose_record_is_not_a_hash_is_listed_as_the_cli_lists_it(
    client: Client, r: redis.Redis, redis_url: str
) -> None:
    r.zadd("cvy:{dm}:q:dm/work:dead", {"broken": 1700000000000, "gone": 1700000000001})
    r.set("cvy:{dm}:job:broken", "not a hash")
    listed = _dead_json(client, "dm/work")
    assert listed == conveyor(redis_url, "dlq", "list", "dm/work")
    assert listed[0]["reason"] == "malformed: job key is a string, not a hash" and listed[1]["reason"] == ""
    assert client.retry_dead("dm/work") == 0, "a record it cannot use stays dead"


def test_async_dead_letters(redis_url: str, r: redis.Redis, start_worker: Any, tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    flag.write_text("up")
    start_worker("dla/work", HANDLER)

    async def main() -> None:
        async with AsyncClient.from_url(redis_url) as c:
            for i in ("a1", "a2"):
                await c.enqueue("dla/work", {"mode": "fail-while", "flag": str(flag)}, id=i, attempts=1)
            await c.wait(["a1", "a2"], timeout=60)
            dead = await c.dead_letters("dla/work")
            assert [d.id for d in dead] == [d["id"] for d in conveyor(redis_url, "dlq", "list", "dla/work")]
            assert sorted(d.id for d in dead) == ["a1", "a2"]
            flag.unlink()
            assert await c.retry_dead("dla/work", ["a1"]) == 1
            assert (await c.wait(["a1"], timeout=60))["a1"].state == "completed"
            assert await c.purge_dead("dla/work") == 1
            assert await c.dead_letters("dla/work") == []

    asyncio.run(main())


# -- schedules ---------------------------------------------------------------------------------


def _schedule_json(s: Any) -> Dict[str, Any]:
    """A Schedule in `conveyor schedule list --json`'s shape."""
    out: Dict[str, Any] = {"name": s.name}
    if s.every_ms is not None:
        out["every"] = f"{s.every_ms}ms"
    else:
        out["cron"] = s.cron
        if s.tz is not None:
            out["tz"] = s.tz
    iso = None
    if s.next_run is not None:
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s.next_run / 1000)) + f".{s.next_run % 1000:03d}Z"
    return {**out, "data": s.data, "attempts": s.attempts, "nextRun": iso}


def test_schedules_set_listed_and_removed_on_either_side(client: Client, redis_url: str) -> None:
    made = client.add_schedule("sc/work", "every-minute", every=60, data={"n": 1}, attempts=2)
    assert made.every_ms == 60_000 and made.next_run is not None
    conveyor(redis_url, "schedule", "add", "sc/work", "berlin", "--cron", "30 9 * * MON-FRI", "--tz", "Europe/Berlin",
             '{"report": true}')
    listed = conveyor(redis_url, "schedule", "list", "sc/work")
    assert [_schedule_json(s) for s in client.schedules("sc/work")] == listed
    assert [s["name"] for s in listed] == ["berlin", "every-minute"]
    assert client.stats("sc/work")["delayed"] == 2, "each schedule's next tick waits as a delayed job"

    cron = client.add_schedule("sc/work", "hourly", cron="0 * * * *", tz="Asia/Kolkata")
    (shown,) = [s for s in conveyor(redis_url, "schedule", "list", "sc/work") if s["name"] == "hourly"]
    assert shown == _schedule_json(cron) and shown["nextRun"].endswith(":30:00.000Z")

    assert client.remove_schedule("sc/work", "every-minute") is True
    assert client.remove_schedule("sc/work", "every-minute") is False
    assert cli(redis_url, "schedule", "remove", "sc/work", "berlin").returncode == 0
    assert [s["name"] for s in conveyor(redis_url, "schedule", "list", "sc/work")] == ["hourly"]


def test_a_schedule_from_python_runs_on_a_real_worker(client: Client, start_worker: Any) -> None:
    client.add_schedule("st/work", "tick", every=1, data={"mode": "ok", "steps": 1})
    start_worker("st/work", HANDLER)
    wait_for("two ticks completed", lambda: client.counters("st/work").get("completed", 0) >= 2, 120)


CRON_CASES = [
    ("0 * * * *", None), ("*/7 9-17 * * MON-FRI", "Europe/Berlin"), ("30 2 * * *", "America/New_York"),
    ("0 0 1,15 * 3", None), ("15 10 31 * *", None), ("0 12 29 2 *", "Asia/Tokyo"),
    ("*/15 * * * * *", None), ("@weekly", "Australia/Sydney"), ("0 0 * JAN,JUL SUN", None), ("5-10/2 3 * * 7", None),
    ("30 2 * * *", "Europe/Berlin"), ("0,30 * * * *", "Europe/Berlin"), ("15 2 * * *", "America/New_York"),
]


def test_cron_next_runs_match_the_typescript_side(redis_url: str) -> None:
    # around now and a DST change in each hemisphere
    starts = [int(time.time() * 1000), 1774738800123, 1774745000000, 1775318400000, 1792800000500, 1792890000000,
              1772953200000]
    cases = [[expr, tz, at] for expr, tz in CRON_CASES for at in starts]
    assert [next_run(expr, tz, at) for expr, tz, at in cases] == ts("cron", redis_url, json.dumps(cases))


# -- groups ------------------------------------------------------------------------------------


def _groups_json(client: Client, queue: str) -> Dict[str, Any]:
    """Client.groups in `conveyor group list --json`'s shape."""
    g = client.groups(queue)
    rate = lambda v: None if v is None else str(v)  # noqa: E731
    return {"defaultConcurrency": g.default_concurrency, "defaultRate": rate(g.default_rate),
            "defaultOnDead": g.default_on_dead, "waiting": g.waiting,
            "groups": [{"group": s.group, "waiting": s.waiting, "running": s.running, "concurrency": s.concurrency,
                        "override": s.override, "rate": rate(s.rate), "paused": s.paused, "weight": s.weight,
                        "onDead": s.on_dead, "blockedBy": s.blocked_by} for s in g.groups],
            "total": len(g.groups)}


def test_group_settings_from_python_and_the_cli_agree(client: Client, r: redis.Redis, redis_url: str) -> None:
    client.enqueue_many("gr/work", [{"data": i, "group": "acme" if i % 2 else "globex"} for i in range(5)])
    client.limit_group("gr/work", concurrency=3, rate="10/s")
    client.set_group("gr/work", "acme", concurrency=1, weight=5, on_dead="block")
    client.pause_group("gr/work", "globex")
    python_side = r.hgetall("cvy:{gr}:q:gr/work:gcontrol")
    assert _groups_json(client, "gr/work") == conveyor(redis_url, "group", "list", "gr/work")
    listed = {g.group: g for g in client.groups("gr/work").groups}
    assert (listed["acme"].concurrency, listed["acme"].weight, listed["globex"].paused) == (1, 5, True)

    client.resume_group("gr/work", "globex")
    client.set_group("gr/work", "acme", concurrency=None, weight=None, on_dead=None, rate=None)
    assert not client.groups("gr/work").groups[0].override
    r.delete("cvy:{gr}:q:gr/work:gcontrol")
    for args in (["limit", "gr/work", "--concurrency", "3", "--rate", "10/s"],
                 ["set", "gr/work", "acme", "--concurrency", "1", "--weight", "5", "--on-dead", "block"],
                 ["pause", "gr/work", "globex"]):
        conveyor(redis_url, "group", *args)
    assert r.hgetall("cvy:{gr}:q:gr/work:gcontrol") == python_side
    assert _groups_json(client, "gr/work") == conveyor(redis_url, "group", "list", "gr/work")


def test_async_groups_pause_and_rate_limits(redis_url: str, r: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncClient.from_url(redis_url) as c:
            await c.set_group("ga/work", "t1", concurrency=2, rate=RateLimit(3, 2000))
            await c.pause_group("ga/work", "t1")
            (t1,) = conveyor(redis_url, "group", "list", "ga/work")["groups"]
            assert (t1["concurrency"], t1["rate"], t1["paused"]) == (2, "3/2000ms", True)
            await c.resume_group("ga/work", "t1")
            assert not (await c.groups("ga/work")).groups[0].paused
            await c.pause("ga/work")
            await c.set_rate_limit("ga/work", "5/h")
            stats = conveyor(redis_url, "stats", "ga/work")
            assert (stats["paused"], stats["rateLimit"]) == (True, "5/h")
            await c.resume("ga/work")
            await c.remove_rate_limit("ga/work")
            assert await c.control("ga/work") == (False, None)

    asyncio.run(main())


# -- resources ---------------------------------------------------------------------------------


def _resources_json(states: Any) -> List[Dict[str, Any]]:
    """Client.resources in `conveyor resource list --json`'s shape."""
    out = []
    for s in states:
        keys = [{"id": k.id, "limits": [{"unit": l.unit, "max": l.max, "windowMs": l.window_ms, "used": l.used,
                                         "utilization": l.utilization} for l in k.limits],
                 "benchedUntil": k.benched_until, "admitted": k.admitted} for k in s.keys]
        out.append({"pipeline": s.pipeline, "name": s.name, "ceiling": s.ceiling, "keys": keys, "waiting": s.waiting,
                    "waitingByQueue": s.waiting_by_queue})
    return out


def test_resources_set_listed_benched_and_removed_on_either_side(
    client: Client, r: redis.Redis, redis_url: str
) -> None:
    client.set_resource("rs/ocr", "llm", {"k1": "requests=60/m,tokens=200000/m",
                                          "k2": [ResourceLimit("requests", 10, 2000)]}, ceiling=0.8)
    python_side = r.hgetall("cvy:{rs}:res:llm")
    assert _resources_json(client.resources("rs")) == conveyor(redis_url, "resource", "list", "--pipeline", "rs")
    r.delete("cvy:{rs}:res:llm")
    conveyor(redis_url, "resource", "set", "llm", "--key", "k1", "--limit", "requests=60/m,tokens=200000/m",
             "--key", "k2", "--limit", "requests=10/2s", "--ceiling", "0.8", "--pipeline", "rs")
    assert r.hgetall("cvy:{rs}:res:llm") == python_side

    conveyor(redis_url, "resource", "set", "search", "--key", "s", "--limit", "requests=5/s", "--pipeline", "rs/ocr")
    until = time.time() + 600
    client.bench_resource_key("rs", "search", "s", until)
    listed = conveyor(redis_url, "resource", "list")
    assert [x["name"] for x in listed] == ["llm", "search"] and _resources_json(client.resources()) == listed
    assert listed[1]["keys"][0]["benchedUntil"] == round(until * 1000)

    assert client.remove_resource("rs/ocr", "llm") is True
    assert client.remove_resource("rs", "llm") is False
    assert [x["name"] for x in conveyor(redis_url, "resource", "list", "--pipeline", "rs")] == ["search"]


def test_async_resources_and_schedules(redis_url: str, r: redis.Redis) -> None:
    async def main() -> None:
        async with AsyncClient.from_url(redis_url) as c:
            await c.set_resource("ra", "llm", {"k": "requests=3/s"})
            assert _resources_json(await c.resources("ra")) == conveyor(redis_url, "resource", "list", "--pipeline", "ra")
            assert await c.remove_resource("ra", "llm") is True
            assert await c.resources("ra") == []
            s = await c.add_schedule("ra/work", "nightly", cron="0 3 * * *", tz="Europe/Paris", data=[1])
            assert [_schedule_json(x) for x in await c.schedules("ra/work")] == conveyor(
                redis_url, "schedule", "list", "ra/work") == [_schedule_json(s)]
            assert await c.remove_schedule("ra/work", "nightly") is True

    asyncio.run(main())


def test_async_enqueue_flow_runs_in_order(redis_url: str, r: redis.Redis, start_worker: Any) -> None:
    start_worker("af/one", HANDLER)

    async def main() -> None:
        async with AsyncClient.from_url(redis_url) as c:
            flow = await c.enqueue_flow("af", [
                {"key": "b", "queue": "af/one", "data": {"mode": "ok", "steps": 1}, "parents": ["a"]},
                {"key": "a", "queue": "af/one", "data": {"mode": "ok", "steps": 1}},
            ])
            assert (await c.get_job(flow.ids["b"])).state in ("waiting-children", "ready", "active", "completed")
            out = await c.wait(flow.ids.values(), timeout=60)
            a, b = out[flow.ids["a"]], out[flow.ids["b"]]
            assert (a.state, b.state) == ("completed", "completed") and b.started_at >= a.finished_at
            assert conveyor(redis_url, "flow", flow.flow_id)["counts"].get("completed") == 2

    asyncio.run(main())


# -- bad arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize("call, message", [
    (lambda c: c.set_rate_limit("q", "20/d"), "expected <N>/<s|m|h>"),
    (lambda c: c.set_rate_limit("q", RateLimit(0, 1000)), "the maximum must be an integer 1..1000000"),
    (lambda c: c.pause("bad name"), "invalid queue name"),
    (lambda c: c.dead_letters("q", limit=0), "limit must be an integer 1..100000"),
    (lambda c: c.retry_dead("q", "d1"), "ids must be a list of job ids"),
    (lambda c: c.retry_dead("q", ["bad id"]), "invalid job id"),
    (lambda c: c.add_schedule("q", "s"), "exactly one of every"),
    (lambda c: c.add_schedule("q", "s", every=0.5), "every must be at least 1 s"),
    (lambda c: c.add_schedule("q", "s", every=5, tz="UTC"), "tz applies to cron schedules only"),
    (lambda c: c.add_schedule("q", "s", cron="0 * * *"), "expected 5 fields"),
    (lambda c: c.add_schedule("q", "s", cron="61 * * * *"), "minute field '61' is out of range"),
    (lambda c: c.add_schedule("q", "s", cron="0 * * * *", tz="Mars/Olympus"), "invalid time zone 'Mars/Olympus'"),
    (lambda c: c.add_schedule("q", "s", cron="0 0 30 2 *"), "never fires"),
    (lambda c: c.add_schedule("q", "bad name", every=5), "invalid schedule name"),
    (lambda c: c.add_schedule("q", "s", every=5, data={1, 2}), "schedule data is not JSON"),
    (lambda c: c.set_group("q", "g"), "needs concurrency, rate, weight or on_dead"),
    (lambda c: c.set_group("q", concurrency=0), "concurrency must be an integer 1..1000000"),
    (lambda c: c.set_group("q", weight=2), "weight is set per group"),
    (lambda c: c.set_group("q", "g", on_dead="stop"), "on_dead must be 'block', 'continue' or None"),
    (lambda c: c.pause_group("q", "é" * 65), "group is 130 bytes, limit 128"),
    (lambda c: c.set_resource("p", "llm", {"k": "requests=60/d"}), "is not <unit>=<max>/<window>"),
    (lambda c: c.set_resource("p", "llm", {"k": "requests=1/s"}, ceiling=1.5), "ceiling must be a number in"),
    (lambda c: c.set_resource("p", "llm", {}), "at least one key"),
    (lambda c: c.set_resource("p", "llm", {"k": [ResourceLimit("Tokens", 1, 1000)]}), "unit 'Tokens' is invalid"),
    (lambda c: c.resources("bad name"), "pipeline 'bad name' is invalid"),
    (lambda c: c.bench_resource_key("p", "llm", "k", "soon"), "until must be a datetime"),
])
def test_a_bad_argument_is_refused_naming_it_before_redis(call: Any, message: str) -> None:
    # (port 1: nothing listens, so any call that reached Redis would fail with a connection error)
    with Client.from_url("redis://127.0.0.1:1") as c:
        with pytest.raises(ValueError, match=re.escape(message)):
            call(c)


def test_async_bad_arguments_raise_the_same_errors() -> None:
    async def main() -> None:
        async with AsyncClient.from_url("redis://127.0.0.1:1") as c:
            with pytest.raises(InvalidArgumentError, match="exactly one of every"):
                await c.add_schedule("q", "s")
            with pytest.raises(InvalidArgumentError, match="weight is set per group"):
                await c.set_group("q", weight=2)

    asyncio.run(main())


# -- Redis Cluster -----------------------------------------------------------------------------


def test_queue_control_on_a_redis_cluster(cluster_url: str, start_worker: Any, tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    flag.write_text("up")
    with Client.from_url(cluster_url) as c:
        c.redis.flushall()
        for p in ("docs", "mail", "x"):  # (three pipelines: three slots)
            q = f"{p}/ocr"
            c.pause(q)
            c.set_rate_limit(q, "5/s")
            assert c.control(q) == (True, RateLimit(5, 1000))
            c.resume(q)
            c.set_group(q, "acme", concurrency=1)
            c.pause_group(q, "acme")
            assert c.groups(q).groups[0].paused
            assert [s.name for s in [c.add_schedule(q, "s", every=60)]] == [s.name for s in c.schedules(q)]
            c.set_resource(p, "llm", {"k": "requests=1/s"})
        assert [(s.pipeline, s.name) for s in c.resources()] == [("docs", "llm"), ("mail", "llm"), ("x", "llm")]
        assert conveyor(cluster_url, "stats", "mail/ocr")["rateLimit"] == "5/s"

        start_worker("mail/ocr", HANDLER, None, redis=cluster_url)
        for i in ("c1", "c2"):
            c.enqueue("mail/ocr", {"mode": "fail-while", "flag": str(flag)}, id=i, attempts=1)
        c.wait(["c1", "c2"], timeout=60)
        assert sorted(d.id for d in c.dead_letters("mail/ocr")) == ["c1", "c2"]

    async def main() -> None:
        async with AsyncClient.from_url(cluster_url) as a:
            assert sorted(d.id for d in await a.dead_letters("mail/ocr")) == ["c1", "c2"]
            assert (await a.groups("docs/ocr")).groups[0].group == "acme"
            flag.unlink()
            assert await a.retry_dead("mail/ocr") == 2
            done = await a.wait(["c1", "c2"], timeout=60)
            assert {j.state for j in done.values()} == {"completed"}

    asyncio.run(main())
