"""Connecting: a wrong URL fails within the connect timeout, naming the URL (never its password)
and the likely cause, instead of hanging; the timeouts are from_url's keywords."""

import json
import socket
import subprocess
import threading
from typing import Any, Dict, List

import pytest
import redis

from conftest import PACKAGE, PYTHON, free_port, wait_for
from conveyor import Client
from conveyor.client import DEFAULT_CONNECT_TIMEOUT, DEFAULT_SOCKET_TIMEOUT

# One enqueue through Client and one through AsyncClient, in a process of its own: a client that
# hangs is killed at the subprocess timeout instead of hanging the suite.
ATTEMPT = """
import asyncio, json, sys, time
from conveyor import Client
from conveyor.aio import AsyncClient

url, kwargs = sys.argv[1], json.loads(sys.argv[2])
out = []
def report(t, err):
    out.append({"seconds": time.monotonic() - t, "type": type(err).__name__, "message": str(err)})
t = time.monotonic()
try:
    Client.from_url(url, **kwargs).enqueue("mail", {"to": "a"})
except Exception as err:
    report(t, err)
async def main():
    t = time.monotonic()
    try:
        await AsyncClient.from_url(url, **kwargs).enqueue("mail", {"to": "a"})
    except Exception as err:
        report(t, err)
asyncio.run(main())
print(json.dumps(out))
"""


def attempt(url: str, timeout: float, **kwargs: Any) -> List[Dict[str, Any]]:
    done = subprocess.run([PYTHON, "-c", ATTEMPT, url, json.dumps(kwargs)], capture_output=True, text=True,
                          timeout=timeout, cwd=str(PACKAGE))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_tls_to_a_plain_redis_fails_within_the_connect_timeout_naming_the_url(redis_url: str) -> None:
    port = redis_url.rsplit(":", 1)[1]
    url = f"rediss://app:s3cret@127.0.0.1:{port}"
    failures = attempt(url, timeout=2 * DEFAULT_CONNECT_TIMEOUT + 30)
    assert len(failures) == 2, failures  # both clients failed
    for failure in failures:
        assert failure["type"] in ("TimeoutError", "ConnectionError")
        assert failure["seconds"] < DEFAULT_CONNECT_TIMEOUT + 5
        message = failure["message"]
        assert f"rediss://app:***@127.0.0.1:{port}" in message and "s3cret" not in message
        assert "not serving TLS" in message and "redis://" in message


def test_timeouts_are_settable(redis_url: str) -> None:
    port = redis_url.rsplit(":", 1)[1]
    for failure in attempt(f"rediss://127.0.0.1:{port}?password=pw", timeout=30, socket_connect_timeout=0.5):
        assert failure["seconds"] < 3 and "within 0.5 s" in failure["message"]
        assert "password=***" in failure["message"] and "pw" not in failure["message"].replace("password", "")
    # defaults, and None for no limit
    kwargs = Client.from_url(redis_url).redis.connection_pool.connection_kwargs
    assert (kwargs["socket_connect_timeout"], kwargs["socket_timeout"]) == (DEFAULT_CONNECT_TIMEOUT, DEFAULT_SOCKET_TIMEOUT)
    kwargs = Client.from_url(redis_url, socket_timeout=None).redis.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] is None
    # a server that accepts the connection and never answers: the socket timeout ends the wait
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        c = Client.from_url(f"redis://127.0.0.1:{silent.getsockname()[1]}", socket_timeout=0.5)
        with pytest.raises(redis.exceptions.TimeoutError):
            c.enqueue("mail", 1)


def test_nothing_listening_fails_at_once_naming_the_url() -> None:
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    for failure in attempt(url, timeout=30):
        assert failure["type"] == "ConnectionError" and failure["seconds"] < 2
        assert f"redis://:***@127.0.0.1:" in failure["message"] and "hunter2" not in failure["message"]
        assert "connection refused" in failure["message"]


def test_following_events_blocks_within_the_socket_timeout(redis_url: str, r: Any) -> None:
    """events(block=…) longer than the socket timeout keeps following instead of timing out."""
    c = Client.from_url(redis_url, socket_timeout=0.5)
    stream = c.events("mail", follow=True, block=5)
    got: Dict[str, Any] = {}

    def follow() -> None:
        try:
            got["event"] = next(stream)
        except Exception as err:  # noqa: BLE001 - the test reports it
            got["error"] = err

    reads = lambda: int(r.info("commandstats").get("cmdstat_xread", {}).get("calls", 0))  # noqa: E731
    before = reads()
    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    # more than a socket timeout spent in XREAD (several rounds), and still following
    wait_for("XREAD rounds past the socket timeout", lambda: got or reads() - before >= 4, timeout=30)
    assert not got, got
    job_id = Client.from_url(redis_url).enqueue("mail", 1)
    thread.join(30)
    assert "error" not in got and got["event"].id == job_id
    c.close()
