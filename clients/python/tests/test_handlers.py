"""Python handlers under the real TypeScript worker: the HTTP sidecar (conveyor.handler.serve's
server, run in this process), the command contract (conveyor.handler.command, a real process)
and the python: kind (the worker's own `python3 -m conveyor.handler --stdio` process), with progress, job logs, non-retryable errors, retries, dependency failures, the
cancellation check and the callback's token rules; and jobs enqueued from Python."""

import json
import threading
import urllib.error
import urllib.request
from typing import Any, Callable, Iterator, List

import pytest

import fixture_handler
from conftest import HERE, PYTHON, cli, ts, wait_for
from conveyor.handler import make_server


@pytest.fixture()
def sidecar() -> Iterator[str]:
    server = make_server(fixture_handler.handle, 0)  # port 0: bound at once, never raced
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/run"
    server.shutdown()
    server.server_close()


@pytest.fixture()
def task_spec() -> Iterator[Callable[[str], str]]:
    """tests/task_handlers.py as a handler of each kind; an HTTP one's server stops after the test."""
    import task_handlers

    servers: List[Any] = []

    def spec(kind: str) -> str:
        if kind == "http":
            server = make_server(task_handlers.tasks, 0)
            servers.append(server)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            return f"http://127.0.0.1:{server.server_address[1]}/run"
        if kind == "python":
            return "python:tests.task_handlers:tasks"
        return "command:" + json.dumps([PYTHON, str(HERE / "task_command.py")])

    yield spec
    for server in servers:
        server.shutdown()
        server.server_close()


def finished(client: Any, job_id: str) -> Any:
    return wait_for(f"job {job_id} finished", lambda: (j := client.get_job(job_id)) and j.state in ("completed", "dead") and j)


HANDLERS = ["http", "command", "python"]


def handler_spec(kind: str, request: pytest.FixtureRequest) -> str:
    if kind == "http":
        return request.getfixturevalue("sidecar")
    if kind == "python":  # the worker starts `python3 -m conveyor.handler --stdio` itself
        return "python:tests.fixture_handler:handle"
    return "command:" + json.dumps([PYTHON, str(HERE / "command_handler.py")])


@pytest.mark.parametrize("kind", HANDLERS)
def test_progress_logs_and_result(kind: str, request: Any, client: Any, start_worker: Any, redis_url: str) -> None:
    start_worker("docs/ocr", handler_spec(kind, request))
    job_id = client.enqueue("docs/ocr", {"mode": "ok", "steps": 3, "n": 21})
    job = finished(client, job_id)
    assert job.state == "completed"
    execution = job.result.pop("execution")
    assert job.result == {"id": job_id, "attempt": 1, "queue": "docs/ocr", "double": 42}
    assert (job.progress, job.progress_message) == (1, "step 3/3")
    lines = client.job_logs(job_id)
    assert [line.message for line in lines] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert {line.execution_id for line in lines} == {execution}
    # the same, read by the TypeScript admin and the CLI
    assert [line["message"] for line in ts("job", redis_url, job_id)["logs"]] == [l.message for l in lines]
    shown = cli(redis_url, "job", job_id, "--json")
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["state"] == "completed" and view["progress"] == 1
    assert [line["message"] for line in view["logs"]] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert "step 2 of 3" in cli(redis_url, "job", job_id).stdout
    events = [e.type for e in client.events("docs/ocr", follow=False) if e.id == job_id]
    assert events == ["enqueued", "started", "progress", "progress", "progress", "completed"]


@pytest.mark.parametrize("kind", HANDLERS)
def test_non_retryable_error_goes_to_dead_letters_at_once(kind: str, request: Any, client: Any, start_worker: Any) -> None:
    start_worker("mail", handler_spec(kind, request))
    job_id = client.enqueue("mail", {"mode": "bad"}, attempts=5)
    job = finished(client, job_id)
    assert job.state == "dead" and job.attempts_made == 1
    assert "no recipient" in json.dumps(job.error)
    assert [line.message for line in client.job_logs(job_id)] == ["refusing this input"]


@pytest.mark.parametrize("kind", HANDLERS)
def test_other_errors_are_retried(kind: str, request: Any, client: Any, start_worker: Any) -> None:
    start_worker("mail", handler_spec(kind, request))
    job_id = client.enqueue("mail", {"mode": "flaky"}, attempts=3)
    job = finished(client, job_id)
    assert job.state == "completed" and job.result == {"attempt": 2} and job.attempts_made == 2  # failed, then succeeded


@pytest.mark.parametrize("kind", HANDLERS)
def test_a_python_exception_is_the_jobs_error(kind: str, request: Any, client: Any, start_worker: Any, redis_url: str) -> None:
    """The job's error is the handler's exception (type, message, Python traceback), not a
    worker-side HandlerError with a Node stack."""
    start_worker("mail", handler_spec(kind, request))
    job_id = client.enqueue("mail", {"mode": "llm"}, attempts=1)
    job = finished(client, job_id)
    assert job.state == "dead"
    error = job.error
    assert (error["name"], error["message"]) == ("RuntimeError", "LLM timeout")
    stack = error["stack"]
    assert stack.startswith("Traceback (most recent call last):") and "fixture_handler.py" in stack
    assert stack.rstrip().endswith("RuntimeError: LLM timeout")
    assert "worker/handlers" not in stack and "node:" not in stack and ".js:" not in stack
    assert job.dead_reason == "attempts exhausted (1/1): LLM timeout"
    # the dead letter, as the TypeScript admin reads it
    assert json.loads(ts("job", redis_url, job_id)["info"]["error"]) == error


@pytest.mark.parametrize("kind", HANDLERS)
def test_dependency_failure_defers_without_an_attempt(kind: str, request: Any, client: Any, start_worker: Any) -> None:
    w = start_worker("mail", handler_spec(kind, request), None, "--circuit-threshold", "2", "--circuit-backoff", "60s")
    job_id = client.enqueue("mail", {"mode": "dependency"}, attempts=1)
    wait_for("deferred twice", lambda: client.counters("mail").get("deferred", 0) >= 2)
    job = client.get_job(job_id)
    assert job.state in ("ready", "active") and job.attempts_made == 0  # never an attempt spent
    wait_for("circuit open", lambda: "circuit open" in w.logs())


def test_cancellation_check_and_token_lifetime(sidecar: str, client: Any, start_worker: Any) -> None:
    start_worker("docs/ocr", sidecar)
    # a job timeout stops the execution: ctx.cancelled() turns true, the token stops working
    job_id = client.enqueue("docs/ocr", {"mode": "until-cancelled"}, timeout=1, attempts=1)
    job = finished(client, job_id)
    assert job.state == "dead" and "timeout" in json.dumps(job.error)
    ctx = fixture_handler.contexts[job_id]
    wait_for("the handler saw the stop", ctx.cancelled)
    assert [line.message for line in client.job_logs(job_id)] == ["waiting to be stopped"]

    # a long line is cut where the worker cuts it, and marked
    long_id = client.enqueue("docs/ocr", {"mode": "long-log"})
    assert finished(client, long_id).result is True
    assert [line.message for line in client.job_logs(long_id)] == ["é" * 4000 + "…"]

    # a finished execution's token is refused (410), and so is a made-up one
    done_id = client.enqueue("docs/ocr", {"mode": "ok", "steps": 1})
    assert finished(client, done_id).state == "completed"
    stale = fixture_handler.contexts[done_id]
    assert stale.progress(0.5) is False and stale.log("late line") is False and stale.cancelled()
    assert [line.message for line in client.job_logs(done_id)] == ["step 1 of 1"]
    url = stale._url
    for token in (stale._token, "made-up"):
        req = urllib.request.Request(url + "/log", data=b'{"message":"x"}', method="POST")
        req.add_header("authorization", f"Bearer {token}")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=5)
        assert refused.value.code == 410


def test_a_job_enqueued_without_the_pipelines_set_is_found_once_a_worker_started(
    redis_url: str, r: Any, client: Any, sidecar: str, start_worker: Any
) -> None:
    # a hand-written producer that skips SADD cvy:pipelines (docs/protocol.md, plain commands)
    r.hset("cvy:{scans}:job:s1", mapping={
        "id": "s1", "queue": "scans/ocr", "data": '{"mode":"ok","steps":1}', "priority": 0,
        "score": 4398046511104000 + 1, "attempts": 3, "attemptsMade": 0, "stalls": 0, "handbacks": 0,
        "timeout": 0, "createdAt": 1, "idempotencyKey": "", "contentHash": "", "state": "ready",
    })
    r.zadd("cvy:{scans}:q:scans/ocr:ready", {"s1": 4398046511104000 + 1})
    assert cli(redis_url, "job", "s1").returncode == 1  # unknown: nobody registered the pipeline
    start_worker("scans/ocr", sidecar)
    assert finished(client, "s1").state == "completed"
    shown = cli(redis_url, "job", "s1")
    assert shown.returncode == 0 and "completed" in shown.stdout


def test_jobs_from_both_languages_end_as_the_same_records(
    redis_url: str, client: Any, r: Any, start_worker: Any
) -> None:
    """One call from Python, the same from TypeScript, both run by the TypeScript worker (one
    failed attempt, then success): the finished records agree field for field."""
    data = {"mode": "flaky", "n": 1.5}
    ts_job = {"id": "from-ts", "data": data, "priority": 4, "attempts": 4, "idempotencyKey": "k-ts", "timeoutMs": 20000}
    ts("enqueue", redis_url, "docs/ocr", json.dumps([ts_job]))
    client.enqueue("docs/ocr", data, id="from-py", priority=4, attempts=4, idempotency_key="k-py", timeout=20)
    start_worker("docs/ocr", "command:" + json.dumps([PYTHON, str(HERE / "command_handler.py")]))
    records = {}
    for job_id in ("from-ts", "from-py"):
        assert finished(client, job_id).state == "completed"
        raw = r.hgetall(f"cvy:{{docs}}:job:{job_id}")
        assert "id" not in raw and raw.pop("idempotencyKey") == job_id.replace("from", "k")
        for when in ("createdAt", "startedAt", "finishedAt", "score"):
            assert raw.pop(when).isdigit()
        # the failed attempt: the same error, with its own time
        errors = json.loads(raw.pop("errors"))
        assert [e.pop("at") > 0 and e["kind"] == "exception" for e in errors]
        # a completed job's outcome is its result: the failed attempt's error is in its history only
        assert "error" not in raw and "first attempt fails" in errors[0]["message"]
        records[job_id] = {**raw, "errors": errors}
    assert records["from-ts"] == records["from-py"]
    assert records["from-py"]["result"] == '{"attempt":2}' and records["from-py"]["data"] == '{"mode":"flaky","n":1.5}'


def test_cancel_waiting_jobs_writes_what_the_typescript_cancel_writes(redis_url: str, client: Any, r: Any) -> None:
    client.enqueue_many("mail", [{"data": 1, "id": "c-ts"}, {"data": 1, "id": "c-py", "delay": 60}])
    assert ts("cancel", redis_url, "c-ts")["outcome"] == "cancelled"
    got = client.cancel("c-py")
    assert (got.outcome, got.state, got.queue, got.jobs_cancelled) == ("cancelled", "delayed", "mail", 1)
    records = {}
    for job_id in ("c-ts", "c-py"):
        raw = r.hgetall(f"cvy:{{mail}}:job:{job_id}")
        assert "id" not in raw  # the key names the job (docs/protocol.md, "Job record fields")
        # (a waiting priority-0 job has no score: it waits in the line, docs/protocol.md "Ready
        # jobs"; a delayed one keeps one for workers of the previous layout)
        assert ("score" in raw) == (job_id == "c-py")
        for varying in ("createdAt", "cancelledAt", "finishedAt"):
            raw.pop(varying)
        raw.pop("score", None)
        records[job_id] = (raw, r.ttl(f"cvy:{{mail}}:job:{job_id}") > 0)
    assert records["c-ts"] == records["c-py"] and records["c-py"][0]["state"] == "cancelled"
    assert r.zcard("cvy:{mail}:q:mail:ready") == 0 and r.zcard("cvy:{mail}:q:mail:delayed") == 0
    # the cancelled job's line entry stays, counted stale: not ready
    assert r.llen("cvy:{mail}:q:mail:line") == 1 and client.stats("mail")["ready"] == 0
    assert client.cancel("c-py").outcome == "finished" and client.cancel("nope").outcome == "notFound"
    assert client.counters("mail")["cancelled"] == 2


@pytest.mark.parametrize("kind", HANDLERS)
def test_cancel_a_running_job(kind: str, request: Any, client: Any, start_worker: Any, tmp_path: Any) -> None:
    start_worker("docs/ocr", handler_spec(kind, request))
    marker = tmp_path / "marker"
    job_id = client.enqueue("docs/ocr", {"mode": "until-cancelled", "marker": str(marker)})
    wait_for("the handler running", lambda: [l.message for l in client.job_logs(job_id)] == ["waiting to be stopped"])
    got = client.cancel(job_id)
    assert (got.outcome, got.state) == ("cancelled", "active")
    # the worker aborts the handler at its next heartbeat; the handler sees ctx.cancelled()
    wait_for("the handler saw the cancel", lambda: marker.exists() and marker.read_text() == "saw_cancel=True")
    job = client.get_job(job_id)
    assert job.state == "cancelled" and job.result is None and job.attempts_made == 0
    wait_for("no longer in flight", lambda: client.stats("docs/ocr")["inflight"] == 0)
    assert client.get_job(job_id).state == "cancelled"  # the late result was refused


@pytest.mark.parametrize("kind", HANDLERS)
def test_a_flow_job_gets_its_parents_outcomes(kind: str, client: Any, start_worker: Any, task_spec: Any) -> None:
    spec = task_spec(kind)
    queue = f"parents/{kind}"
    flow = client.enqueue_flow("parents", [
        {"key": "a", "queue": queue, "data": {"n": 1}, "task": "classify"},
        {"key": "b", "queue": queue, "data": {"n": 2}, "task": "parents", "parents": ["a"]},
        {"key": "lone", "queue": queue, "data": {"n": 3}, "task": "parents"},
        {"key": "big", "queue": queue, "data": {"n": 4}, "task": "big"},
        {"key": "fetch", "queue": queue, "data": {"n": 5}, "task": "fetch", "parents": ["a", "big"]},
    ])
    start_worker(queue, spec, {"CONVEYOR_RETENTION": "1h"})
    out = client.wait(flow.ids.values(), timeout=120)
    b, lone = out[flow.ids["b"]], out[flow.ids["lone"]]
    assert b.state == "completed", b
    got = b.result["parents"]["a"]
    got["result"].pop("callback")
    assert b.result == {"parents": {"a": {"id": flow.ids["a"], "result": {"task": "classify", "data": {"n": 1}}}}}
    assert lone.result == {"parents": None}
    # a large result comes by reference; ctx.parent_result fetches it through the worker's callback
    fetched = out[flow.ids["fetch"]]
    assert fetched.state == "completed", fetched
    assert fetched.result["big"] == "b" * 5000
    assert fetched.result["a"]["task"] == "classify"


@pytest.mark.parametrize("kind", HANDLERS)
def test_named_tasks_and_previous_errors(kind: str, client: Any, r: Any, start_worker: Any, task_spec: Any) -> None:
    from conveyor._keys import QueueKeys

    spec = task_spec(kind)
    queue = f"tasks/{kind}"
    ids = {name: client.enqueue(queue, {"n": 1}, attempts=3) for name in ("summarize", "classify", "translate", "")}
    # (the task named on the record before any worker runs: the enqueue side names it once it can)
    for name, job_id in ids.items():
        if name:
            r.hset(QueueKeys(queue).job(job_id), "task", name)
    start_worker(queue, spec, {"CONVEYOR_BACKOFF_BASE": "10ms"})
    s = finished(client, ids["summarize"])
    assert s.state == "completed", s
    result = json.loads(s.raw["result"])
    assert result["task"] == "summarize"
    assert [(e["attempt"], e["kind"]) for e in result["previous"]] == [(1, "exception")]
    assert "the first attempt fails" in result["previous"][0]["message"]
    c = finished(client, ids["classify"])
    assert json.loads(c.raw["result"])["task"] == "classify"
    for name, reason in (("translate", "unknown task 'translate' (this worker's tasks: big, classify, fetch, parents, summarize)"),
                         ("", "job names no task (this worker's tasks: big, classify, fetch, parents, summarize)")):
        dead = finished(client, ids[name])
        assert dead.state == "dead" and reason in dead.raw["deadReason"], dead.raw
        assert dead.raw["attemptsMade"] == "1"
