"""The kit's stdio mode (`python3 -m conveyor.handler --stdio module:function`), the process a
`python:` worker starts: frames in and out, errors with their traceback, concurrency, cancels,
async handlers, prints kept out of the frames, a clear failure for a callable that cannot load."""

import json
import os
import subprocess
from typing import Any, Dict, Iterator, List

import pytest

from conftest import HERE, PACKAGE, PYTHON


class Kit:
    def __init__(self, callable_: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "conveyor.handler", "--stdio", *args, callable_],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(HERE),
            env={**os.environ, "PYTHONPATH": str(PACKAGE)},
        )
        self.ready = self.read()

    def send(self, frame: Dict[str, Any]) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self) -> Dict[str, Any]:
        assert self.proc.stdout
        return json.loads(self.proc.stdout.readline())

    def job(self, frame_id: int, data: Any, **extra: Any) -> None:
        self.send({"id": frame_id, "job": {"id": f"j{frame_id}", "queue": "p/s", "data": data, "attempt": 2,
                                           "executionId": f"e{frame_id}", **extra}})

    def close(self) -> str:
        assert self.proc.stdin and self.proc.stderr
        self.proc.stdin.close()
        assert self.proc.wait(30) == 0
        return self.proc.stderr.read().decode()


@pytest.fixture()
def kits() -> Iterator[List[Kit]]:
    started: List[Kit] = []
    yield started
    for k in started:
        if k.proc.poll() is None:
            k.proc.kill()
        k.proc.wait(10)


def test_jobs_and_results_prints_go_to_stderr(kits: List[Kit]) -> None:
    kit = Kit("stdio_handlers:echo")
    kits.append(kit)
    assert kit.ready["ready"] is True and kit.ready["pid"] == kit.proc.pid
    kit.job(1, {"n": "é"}, resources={"llm": "k2"})
    assert kit.read() == {"id": 1, "result": {"id": "j1", "queue": "p/s", "attempt": 2, "data": {"n": "é"},
                                              "execution": "e1", "resources": {"llm": "k2"}}}
    kit.send({"oops": True})  # not a frame: ignored, said on stderr
    kit.job(2, None)
    assert kit.read()["id"] == 2
    err = kit.close()
    assert err.count("a print goes to stderr") == 2 and "ignored a frame" in err


def test_errors_carry_type_message_traceback_and_how_to_treat_them(kits: List[Kit]) -> None:
    kit = Kit("stdio_handlers:classify")
    kits.append(kit)
    for i, kind in enumerate(["bad", "dependency", "limited", "not-json", "other"], start=1):
        kit.job(i, kind)
    replies = {r["id"]: r["error"] for r in (kit.read() for _ in range(5))}
    assert replies[1]["name"] == "NonRetryableError" and replies[1]["retryable"] is False
    assert replies[1]["message"] == "no recipient"
    assert replies[1]["stack"].startswith("Traceback (most recent call last):")
    assert 'stdio_handlers.py", line' in replies[1]["stack"] and "conveyor/handler.py" not in replies[1]["stack"]
    assert replies[2]["dependencyFailure"] is True
    assert replies[3]["rateLimited"] == {"retryAfterMs": 1500, "resource": "llm"}
    assert replies[4]["retryable"] is False and "not JSON" in replies[4]["message"]
    assert replies[5]["name"] == "KeyError" and "retryable" not in replies[5]
    kit.close()


def test_jobs_run_concurrently_up_to_threads(kits: List[Kit]) -> None:
    kit = Kit("stdio_handlers:pair", "--threads", "2")
    kits.append(kit)
    kit.job(1, "a")
    kit.job(2, "b")
    assert sorted((r["id"], r["result"]) for r in (kit.read(), kit.read())) == [(1, "a"), (2, "b")]
    kit.close()


def test_a_cancel_frame_is_seen_by_ctx_cancelled(kits: List[Kit]) -> None:
    kit = Kit("stdio_handlers:until_cancelled")
    kits.append(kit)
    kit.job(1, None)
    kit.send({"id": 1, "cancel": True})
    assert kit.read() == {"id": 1, "result": {"saw_cancel": True}}
    kit.close()


def test_async_handlers_run_on_one_loop_and_a_cancel_cancels_the_task(kits: List[Kit]) -> None:
    kit = Kit("stdio_handlers:slow_async", "--threads", "1")
    kits.append(kit)
    kit.job(1, 5)
    kit.job(2, 0.01)  # not held behind the first: the loop runs both
    assert kit.read() == {"id": 2, "result": 0.01}
    kit.send({"id": 1, "cancel": True})
    assert kit.read()["error"]["name"] == "CancelledError"
    kit.close()


def test_the_end_of_input_lets_running_jobs_finish(kits: List[Kit]) -> None:
    kit = Kit("stdio_handlers:slow_async")
    kits.append(kit)
    kit.job(1, 0.3)
    kit.close()  # exits 0 only after the job's reply was written
    assert kit.proc.stdout and json.loads(kit.proc.stdout.readline()) == {"id": 1, "result": 0.3}


@pytest.mark.parametrize("spec, error", [
    ("stdio_handlers:missing", "AttributeError: module 'stdio_handlers' has no attribute 'missing'"),
    ("stdio_handlers:not_a_function", "TypeError: stdio_handlers:not_a_function is a int"),
    ("no_such_module:f", "ModuleNotFoundError: No module named 'no_such_module'"),
    ("stdio_handlers", "ValueError: expected module.path:function"),
])
def test_a_callable_that_cannot_load_is_a_fatal_frame(spec: str, error: str) -> None:
    proc = subprocess.run([PYTHON, "-m", "conveyor.handler", "--stdio", spec], capture_output=True, text=True,
                          cwd=str(HERE), env={**os.environ, "PYTHONPATH": str(PACKAGE)}, timeout=30)
    assert proc.returncode == 1
    fatal = json.loads(proc.stdout)["fatal"]
    assert f"{fatal['name']}: {fatal['message']}".startswith(error)
    assert error.split(":")[0] in proc.stderr  # the traceback, for a human
