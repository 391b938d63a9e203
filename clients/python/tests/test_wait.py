"""Client.wait and AsyncClient.wait against a real Redis and real workers: each job's end
(completed with its result, dead, cancelled), a job ended before the wait, a timeout."""
import asyncio
import threading
import time
from typing import Any, Dict

from conveyor import Client
from conveyor.aio import AsyncClient


def test_wait_answers_completed_dead_cancelled_and_a_timeout(
    client: Client, redis_url: str, start_worker: Any
) -> None:
    from conftest import REPO

    handler = f"module:{REPO / 'test' / 'fixtures' / 'recordingHandler.js'}"
    ok = client.enqueue("pw/a", {"result": {"n": 1}})
    bad = client.enqueue("pw/a", {"failTimes": 5}, attempts=1)
    gone = client.enqueue("pw/b", {"n": 3})
    assert client.cancel(gone).outcome == "cancelled"
    stays = client.enqueue("pw/idle", {"n": 4})  # no worker serves it

    waited: Dict[str, Any] = {}
    t = threading.Thread(target=lambda: waited.update(client.wait([ok, bad, gone], timeout=120)))
    t.start()
    start_worker("pw/a", handler, {"CONVEYOR_RETENTION": "1h"})
    t.join(150)
    assert not t.is_alive()
    assert waited[ok].state == "completed" and waited[ok].result == {"n": 1}
    assert waited[bad].state == "dead"
    assert waited[gone].state == "cancelled"

    # ended before the wait: from the records at once; a job that stays open: at the timeout
    t0 = time.monotonic()
    again = client.wait([ok, bad, stays, "never-enqueued"], timeout=0.3)
    assert time.monotonic() - t0 >= 0.29
    assert again[ok].result == {"n": 1} and again[bad].state == "dead"
    assert again[stays].state == "ready"
    assert "never-enqueued" not in again

    async def aio() -> Dict[str, Any]:
        async with AsyncClient.from_url(redis_url) as c:
            return await c.wait([ok, stays], timeout=0.3)

    out = asyncio.run(aio())
    assert out[ok].state == "completed" and out[stays].state == "ready"


def test_the_start_of_a_wait_on_2000_ids_reads_their_records_in_a_few_calls(client: Client, r: Any) -> None:
    from conveyor._keys import PipelineKeys

    ids = [e.id for e in client.enqueue_many("pwn/a", [{"data": i} for i in range(2000)])]
    for job_id in ids:
        assert client.cancel(job_id, "pwn/a").outcome == "cancelled"
    r.set(PipelineKeys("pwn").job("pw-malformed"), "not a hash")

    with r.monitor() as m:
        out = client.wait([*ids, "pw-malformed", "pw-no-record"], timeout=10)
        marker = f"wait started {time.time()}"
        r.echo(marker)
        sent = []  # the commands clients sent; a script's own calls are from "lua"
        while True:
            c = m.next_command()
            if marker in c["command"]:
                break
            if c["client_type"] != "lua":
                sent.append(c["command"].split(" ")[0])

    assert len(out) == 2000 and all(j.state == "cancelled" for j in out.values())
    assert "pw-malformed" not in out and "pw-no-record" not in out
    # (an HGETALL per id before: 2,000 here)
    assert len(sent) <= 20, f"{len(sent)} commands: {sent[:8]} …"


def test_a_wait_on_2000_ids_reads_the_records_of_the_ends_it_sees_together(
    client: Client, redis_url: str, r: Any
) -> None:
    import redis

    ids = [e.id for e in client.enqueue_many("pwe/a", [{"data": i} for i in range(2000)])]
    reads = []  # per-job reads clients sent (a script's own calls are from "lua")
    xread = threading.Event()
    marker = f"wait ended {time.time()}"

    def watch() -> None:
        with redis.Redis.from_url(redis_url, decode_responses=True).monitor() as m:
            while True:
                c = m.next_command()
                if marker in c["command"]:
                    return
                if c["client_type"] == "lua":
                    continue
                name = c["command"].split(" ")[0].upper()
                if name == "XREAD":
                    xread.set()
                if name in ("HGETALL", "HMGET", "SMEMBERS"):
                    reads.append(name)

    watcher = threading.Thread(target=watch)
    watcher.start()
    waited: Dict[str, Any] = {}
    t = threading.Thread(target=lambda: waited.update(client.wait(ids, timeout=120)))
    t.start()
    assert xread.wait(60), "the wait never read the streams"
    start = len(reads)
    with Client.from_url(redis_url) as other:
        for job_id in ids:
            assert other.cancel(job_id, "pwe/a").outcome == "cancelled"
    t.join(120)
    r.echo(marker)
    watcher.join(60)

    assert len(waited) == 2000 and all(j.state == "cancelled" for j in waited.values())
    # (an SMEMBERS and an HGETALL per id before: 4,000 here)
    assert len(reads) - start <= 20, f"{len(reads) - start} reads after the start"
