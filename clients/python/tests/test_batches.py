"""The kit's batch handlers under the real TypeScript worker (--batch-size): the HTTP sidecar
(make_batch_server, run in this process), the command program (command_batch) and the python:
kind (a @batch function in the worker's own Python process): one outcome per job, a NonRetryableError outcome dead at once, a raised exception failing every job of the call."""

import json
import os
import subprocess
import threading
from typing import Any, Iterator

import pytest

import batch_handlers
from conftest import CONVEYOR, HERE, NODE, PACKAGE, PYTHON, REPO, wait_for
from conveyor.handler import make_batch_server


@pytest.fixture()
def batch_sidecar() -> Iterator[str]:
    server = make_batch_server(batch_handlers.embed, 0)  # port 0: bound at once, never raced
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/batch"
    server.shutdown()
    server.server_close()


def finished(client: Any, job_id: str) -> Any:
    return wait_for(f"job {job_id} finished", lambda: (j := client.get_job(job_id)) and j.state in ("completed", "dead") and j)


@pytest.mark.parametrize("kind", ["http", "command", "python"])
def test_batch_outcomes(kind: str, request: Any, client: Any, start_worker: Any) -> None:
    handler = (request.getfixturevalue("batch_sidecar") if kind == "http"
               else "python:tests.batch_handlers:embed" if kind == "python"
               else "command:" + json.dumps([PYTHON, str(HERE / "batch_command.py")]))
    queue = f"emb/{kind}"
    start_worker(queue, handler, None, "--batch-size", "10", "--batch-min", "3", "--batch-wait", "5s")
    ok = client.enqueue(queue, {"n": 1})
    bad = client.enqueue(queue, {"n": 2, "bad": True}, attempts=3)
    boom = client.enqueue(queue, {"n": 3, "boom": True}, attempts=2)
    # the first call raised (boom's first attempt): every job of it failed once and was retried
    for job_id, n in ((ok, 1), (boom, 3)):
        job = finished(client, job_id)
        assert job.state == "completed", job
        assert job.result["n"] == n * 2
        assert job.attempts_made == 2
    dead = finished(client, bad)
    assert dead.state == "dead"
    assert dead.attempts_made == 2  # the raised call, then its own NonRetryableError: dead at once
    assert "is bad" in (dead.dead_reason or "")


def test_python_kind_refuses_a_function_not_marked_batch(redis_url: str) -> None:
    proc = subprocess.run(
        [NODE, CONVEYOR, "worker", "--queue", "emb/plain", "--handler", "python:tests.fixture_handler:handle",
         "--redis", redis_url, "--port", "0", "--batch-size", "10"],
        capture_output=True, text=True, timeout=60, cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(PACKAGE)},
    )
    assert proc.returncode == 2
    assert "tests.fixture_handler:handle is not a batch handler" in proc.stdout + proc.stderr
