"""examples/python: the sidecar under a real worker and the producer script, end to end; the
sidecar finishes the jobs it is running when it gets SIGTERM (warm shutdown, like the worker)."""

import os
import signal
import subprocess
from typing import Any, Iterator

import pytest

from conftest import PACKAGE, PYTHON, REPO, free_port, wait_for

EXAMPLES = REPO / "examples" / "python"


@pytest.fixture()
def sidecar() -> Iterator[Any]:
    port = free_port()
    proc = subprocess.Popen(
        [PYTHON, str(EXAMPLES / "sidecar.py")],
        env={**os.environ, "PORT": str(port), "PYTHONPATH": str(PACKAGE)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    import urllib.request

    wait_for("sidecar up", lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).status == 200)
    proc.url = f"http://127.0.0.1:{port}/run"  # type: ignore[attr-defined]
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def test_producer_and_sidecar_examples(sidecar: Any, redis_url: str, r: Any, start_worker: Any) -> None:
    start_worker("docs/read", sidecar.url, None, "--concurrency", "4")
    run = lambda: subprocess.run(  # noqa: E731
        [PYTHON, str(EXAMPLES / "producer.py"), redis_url, "3"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(PACKAGE)},
    )
    first = run()
    assert first.returncode == 0, first.stdout + first.stderr
    assert "enqueued 4 new of 4" in first.stdout
    assert first.stdout.count("completed {'pages': 2, 'words': 10, 'per_page': [5, 5]}") == 3
    assert "log: page 2: 5 words" in first.stdout
    assert ": dead " in first.stdout and "NonRetryableError" in first.stdout
    second = run()  # idempotency keys: nothing new, the same results
    assert second.returncode == 0 and "enqueued 0 new of 4" in second.stdout, second.stdout + second.stderr


def test_sidecar_finishes_running_jobs_after_sigterm(sidecar: Any, client: Any, start_worker: Any) -> None:
    start_worker("docs/read", sidecar.url)
    job_id = client.enqueue("docs/read", {"pages": ["a b", "c d", "e f"], "page_seconds": 0.7})
    wait_for("the job running", lambda: (j := client.get_job(job_id)) and j.progress and j.progress > 0)
    sidecar.send_signal(signal.SIGTERM)
    job = wait_for("the job finished", lambda: (j := client.get_job(job_id)) and j.state in ("completed", "dead") and j)
    assert job.state == "completed" and job.result["words"] == 6
    assert sidecar.wait(30) == 0  # then it exits by itself, once idle


def test_two_stage_python_pipeline_with_one_command_per_stage(redis_url: str, start_worker: Any) -> None:
    # the README's two commands: each worker starts its own Python process (no sidecar, no port)
    env = {"PYTHONPATH": os.pathsep.join([str(EXAMPLES), str(PACKAGE)])}
    extract = start_worker("docs/extract", "python:handlers:extract", env, "--next-queue", "docs/summarize",
                           "--concurrency", "4")
    start_worker("docs/summarize", "python:handlers:summarize", env, "--concurrency", "4")
    run = subprocess.run(
        [PYTHON, str(EXAMPLES / "pipeline.py"), redis_url, "3"], capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": str(PACKAGE)},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("completed {'top': [['handlers', 2], ['python', 2], ['document', 1]], 'words': 16") == 3
    assert "extract " in extract.logs() and ": 16 words" in extract.logs()  # its prints, on the worker's stderr
