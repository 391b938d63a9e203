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
