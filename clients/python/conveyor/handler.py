"""A handler kit for Conveyor workers, standard library only.

serve(fn, port=8080) is an HTTP sidecar for `handler: {http: …}` pools; command(fn) is the main of a
program for `handler: {command: […]}` pools; serve_stdio(fn) (`python3 -m conveyor.handler --stdio
module.path:function`) is the long-lived process the worker itself starts for `handler: {python: …}`
pools (`--handler python:module.path:function`). Either way `fn(job, ctx)` gets the job and a context
and returns the result (any JSON value). It raises NonRetryableError for input that can never
succeed (dead-lettered at once), DependencyFailure when something it depends on is down (the job
is deferred without an attempt and the worker's circuit breaker counts it), anything else to fail
the attempt (retried with backoff). ctx.progress(), ctx.log() and ctx.cancelled() reach the
worker through the execution's loopback callback (docs/protocol.md, "Handler callback").
Batch handlers (docs/batches.md, a worker with --batch-size above 1): serve_batch(fn, port) and
command_batch(fn) call `fn(jobs, contexts)` with several jobs at once; it returns one outcome per
job, in order — the job's result, or an exception instance that fails that job alone (a
NonRetryableError: dead at once). Raising fails every job of the call.
For a job with `uses` (docs/budgets.md), ctx.resources maps each resource to the key id the
claim granted, ctx.usage() reports what the job actually used, and RateLimited (a provider's
429) benches that key for every worker and puts the job back without using an attempt.
"""

import concurrent.futures
import importlib
import inspect
import json
import os
import re
import signal
import sys
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Mapping, Optional

from . import _json
from ._keys_generated import (
    HANDLER_ENV_ATTEMPT,
    HANDLER_ENV_CALLBACK_TOKEN,
    HANDLER_ENV_CALLBACK_URL,
    HANDLER_ENV_EXECUTION_ID,
    HANDLER_ENV_JOB_ID,
    HANDLER_ENV_PARENTS,
    HANDLER_ENV_PREVIOUS_ERRORS,
    HANDLER_ENV_QUEUE,
    HANDLER_ENV_RESOURCES,
    HANDLER_ENV_TASK,
)

EX_DATAERR = 65  # command contract: the input is bad, do not retry
EX_TEMPFAIL = 75  # command contract: a dependency failed, defer without an attempt
MAX_LINE_CHARS = 4001  # one more than a job log line keeps, so the worker marks the cut


class NonRetryableError(Exception):
    """The input can never succeed: the job goes to dead letters without further attempts."""


class RateLimited(Exception):
    """A provider refused for its rate limit: the job's key for `resource` (its only resource
    when None) is benched for every worker for `retry_after` seconds, and the job goes back to
    waiting without spending an attempt."""

    def __init__(self, message: str = "rate limited", retry_after: Optional[float] = None,
                 resource: Optional[str] = None) -> None:
        super().__init__(message)
        if retry_after is not None and (not isinstance(retry_after, (int, float)) or retry_after < 0):
            raise ValueError(f"retry_after must be a number of seconds >= 0, got {retry_after!r}")
        self.retry_after = retry_after
        self.resource = resource


class DependencyFailure(Exception):
    """Something the handler depends on (a database, an API) failed: the job is deferred
    without spending an attempt, and repeated ones open the worker's circuit breaker."""


@dataclass
class Job:
    id: str
    queue: str
    data: Any
    #: 1-based number of this attempt.
    attempt: int
    #: Unique per start of the job (its lease's fencing token).
    execution_id: str
    #: The job's task name (a Tasks registry dispatches by it); None when the job names none.
    task: Optional[str] = None
    #: The stage's earlier failed attempts, oldest first (the last 5): each {"attempt", "kind"
    #: (exception | invalid-result | timeout | handed-back | stalled), "message", "at" (ms),
    #: "details" (an invalid result's violations)?}. [] on a first attempt.
    previous_errors: List[Dict[str, Any]] = field(default_factory=list)
    #: A flow job's parents' outcomes by key (docs/flows.md): {key: {"id", "result"}},
    #: {key: {"id", "ref", "bytes"}} for a large result (read it with ctx.parent_result(key)), or
    #: {key: {"id", "error"}} for a parent that died or was cancelled; None for a job without parents.
    parents: Optional[Dict[str, Dict[str, Any]]] = None


class ParentResultError(Exception):
    """ctx.parent_result(key) has no result to give: key is not among the job's parents, the
    parent ended with an error, or its result is no longer kept."""


class Context:
    """What a handler may do while it runs: report progress, write log lines, check for a stop,
    read a parent's result."""

    def __init__(self, callback_url: Optional[str], token: Optional[str], timeout: float = 5.0,
                 resources: Optional[Mapping[str, str]] = None,
                 parents: Optional[Mapping[str, Mapping[str, Any]]] = None) -> None:
        #: For a job with `uses`: resource → the key id granted (map it to your credential).
        self.resources: Mapping[str, str] = dict(resources or {})
        self._parents = parents or {}
        self._url = (callback_url or "").rstrip("/")
        self._token = token or ""
        self._timeout = timeout
        self._stopped = threading.Event()

    @property
    def has_callback(self) -> bool:
        return bool(self._url and self._token)

    def _call(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None) -> Optional[Any]:
        """The callback's answer (JSON or True for 204), None when refused or unreachable."""
        if not self.has_callback:
            return None
        data = json.dumps(body).encode("utf-8") if body is not None else None
        req = urllib.request.Request(self._url + path, data=data, method=method)
        req.add_header("authorization", f"Bearer {self._token}")
        if data is not None:
            req.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self._timeout) as res:
                text = res.read()
                return json.loads(text) if text else True
        except urllib.error.HTTPError as err:
            if err.code in (409, 410):  # lease lost, or the execution is over
                self._stopped.set()
            elif err.code == 400:
                raise ValueError(err.read().decode("utf-8", "replace")) from None
            return None
        except (urllib.error.URLError, OSError):
            return None

    def progress(self, fraction: float, message: str = "") -> bool:
        """Record progress (0..1, and an optional message) on the job; False when not recorded."""
        if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not 0 <= fraction <= 1:
            raise ValueError(f"progress must be between 0 and 1, got {fraction!r}")
        return self._call("POST", "/progress", {"fraction": fraction, "message": str(message)}) is True

    def log(self, message: str) -> bool:
        """Append a line to the job's log (capped; `conveyor job <id>` shows it). Also written to
        stderr, which the worker keeps for a failing command."""
        text = str(message)
        print(text, file=sys.stderr, flush=True)
        # The worker keeps 4,000 characters of a line (and marks the cut): send no more than that.
        return bool(text) and self._call("POST", "/log", {"message": text[:MAX_LINE_CHARS]}) is True

    def usage(self, used: Mapping[str, Mapping[str, float]]) -> bool:
        """Report what the job actually used so far, per resource and unit (totals, e.g.
        {"openai": {"tokens": 980}}): the key's window is corrected by the difference from the
        estimate. False when not recorded (no callback)."""
        return self._call("POST", "/usage", {name: dict(units) for name, units in used.items()}) is True

    def _rate_limited(self, err: "RateLimited") -> None:
        body: dict = {}
        if err.retry_after is not None:
            body["retryAfterMs"] = round(err.retry_after * 1000)
        if err.resource is not None:
            body["resource"] = err.resource
        self._call("POST", "/rate-limited", body)

    def parent_result(self, key: str) -> Any:
        """A flow job's parent's result (docs/flows.md, "Large results"): the inline one from
        job.parents, or a large one (an entry {"id", "ref", "bytes"}) fetched through the
        worker's callback. ParentResultError when key is not a parent (or was left out by
        `ignore`), the parent ended with an error, or the result is no longer kept."""
        outcome = self._parents.get(key)
        if not isinstance(outcome, Mapping):
            raise ParentResultError(f"no parent {json.dumps(key)} among this job's parents' outcomes")
        if "error" in outcome:
            raise ParentResultError(f"parent {key} ({outcome.get('id')}) ended without a result: {outcome['error']}")
        if "ref" not in outcome:
            return outcome.get("result")
        if not self.has_callback:
            raise ParentResultError(f"parent {key}: its result comes by reference and this job has no worker callback")
        req = urllib.request.Request(f"{self._url}/parents/{urllib.parse.quote(key, safe='')}", method="GET")
        req.add_header("authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(req, timeout=self._timeout) as res:
                return json.loads(res.read())["result"]
        except urllib.error.HTTPError as err:
            detail = err.read().decode("utf-8", "replace")
            try:
                detail = json.loads(detail).get("error", detail)
            except ValueError:
                pass
            raise ParentResultError(f"parent {key}: {detail}") from None

    def cancelled(self) -> bool:
        """True once the worker stopped this execution (timeout, hand-back, lost lease, cancel)
        or it was told to stop (SIGTERM): a long handler should check it and return or raise."""
        if self._stopped.is_set():
            return True
        status = self._call("GET", "/status")
        if isinstance(status, dict) and status.get("cancelled"):
            self._stopped.set()
        return self._stopped.is_set()


Handler = Callable[[Job, Context], Any]

#: A task's name, as the queue's contract and the enqueue `task` spell it.
TASK_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


class Tasks:
    """Named tasks served by one handler: the registry is itself the handler, dispatching a job
    to the task it names (job.task)::

        tasks = Tasks()

        @tasks.task("summarize")
        def summarize(job):          # or (job, ctx)
            ...

        serve(tasks)                 # or command(tasks); `--handler python:app.handlers:tasks`

    A job naming a task not registered here, or none, fails without further attempts."""

    def __init__(self) -> None:
        self._fns: Dict[str, Callable[..., Any]] = {}

    def task(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        if not isinstance(name, str) or not re.match(TASK_NAME_PATTERN, name):
            raise ValueError(f"task name {name!r} must match {TASK_NAME_PATTERN}")
        if name in self._fns:
            raise ValueError(f"task {name!r} is registered twice")

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self._fns[name] = fn
            return fn

        return register

    @property
    def names(self) -> List[str]:
        return sorted(self._fns)

    def __call__(self, job: Job, ctx: Context) -> Any:
        if not job.task:
            raise NonRetryableError(f"job names no task (this worker's tasks: {', '.join(self.names)})")
        fn = self._fns.get(job.task)
        if fn is None:
            raise NonRetryableError(f"unknown task '{job.task}' (this worker's tasks: {', '.join(self.names)})")
        try:
            takes_ctx = len(inspect.signature(fn).parameters) >= 2
        except (TypeError, ValueError):
            takes_ctx = True
        result = fn(job, ctx) if takes_ctx else fn(job)
        if inspect.isawaitable(result):
            import asyncio

            result = asyncio.run(result)  # (a job thread of its own: no loop runs here)
        return result


def _previous_errors(value: Any) -> List[Dict[str, Any]]:
    """The previous errors as the worker sends them (a list, or its JSON text in a header or the
    environment); [] for anything else."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value else []
        except ValueError:
            return []
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def _parents(value: Any) -> Optional[Dict[str, Dict[str, Any]]]:
    """The parents' outcomes as the worker sends them (a mapping, or its JSON text in a header or
    the environment); None when absent or not a mapping."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value else None
        except ValueError:
            return None
    return {k: v for k, v in value.items() if isinstance(v, dict)} if isinstance(value, dict) else None


def _resources(text: Optional[str]) -> Mapping[str, str]:
    """The granted keys (`Conveyor-Resources` header / CONVEYOR_RESOURCES: {"openai": "k2"})."""
    try:
        v = json.loads(text) if text else {}
    except ValueError:
        return {}
    return {str(k): str(x) for k, x in v.items()} if isinstance(v, dict) else {}


#: The most of a traceback an error envelope carries: its last characters (innermost frames).
MAX_STACK_CHARS = 16 * 1024


def _error_envelope(err: BaseException, tb: Any = None) -> Dict[str, Any]:
    """The error envelope the worker stores as the job's error: {"name", "message", "stack"},
    the stack being the Python traceback from `tb` (default: the error's own; chained exceptions
    included), cut to its last MAX_STACK_CHARS characters."""
    stack = "".join(traceback.format_exception(type(err), err, tb if tb is not None else err.__traceback__))
    if len(stack) > MAX_STACK_CHARS:
        stack = "…" + stack[-MAX_STACK_CHARS:]
    return {"name": type(err).__name__, "message": str(err), "stack": stack}


def _error_body(err: BaseException) -> bytes:
    """The error envelope (_error_envelope) as an HTTP or command handler's JSON body."""
    return json.dumps(_error_envelope(err)).encode("utf-8")


def serve(fn: Handler, port: int = 8080, host: str = "127.0.0.1", idle_exit: float = 2.0) -> None:
    """Run the HTTP sidecar for `fn`: POST (any path) runs a job, GET /healthz answers 200.
    Answers: 200 + the JSON result; 422 for NonRetryableError (final); 503 with
    `Conveyor-Failure: dependency` for DependencyFailure; 500 for any other exception; a failure
    with the error envelope (see _error_body) as its body.

    On SIGTERM/SIGINT it stops accepting connections and closes its listening socket at once, so a
    restarted sidecar can bind the port, and it keeps answering on the connections it has until no
    job has been running for `idle_exit` seconds: the pod's SIGTERM reaches the worker at the
    same moment, and the worker lets its running jobs finish (warm shutdown) — those are requests
    to this sidecar."""
    server = make_server(fn, port, host)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    idle_since: Optional[float] = None
    accepting = True
    try:
        while True:
            stopping.wait(0.2)
            if not stopping.is_set():
                continue
            if accepting:
                # (the running requests' threads carry on: only the listening socket goes)
                server.shutdown()
                server.server_close()
                accepting = False
            if server.active > 0:  # type: ignore[attr-defined]
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= idle_exit:
                return
    finally:
        server.shutdown()
        server.server_close()


def make_server(fn: Handler, port: int = 8080, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """The sidecar server without running it (tests, or embedding in a program of your own)."""

    class Sidecar(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # (the answer's headers and body are separate writes: with Nagle's algorithm on, the body
        # waits for the worker's delayed ACK, ~40 ms a job on loopback)
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass

        def _send(self, status: int, body: bytes, headers: Optional[Mapping[str, str]] = None) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            if self.path.split("?")[0] in ("/healthz", "/readyz"):
                self._send(200, b'{"ok":true}')
            else:
                self._send(404, b'{"error":"POST a job, or GET /healthz"}')

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                data = json.loads(raw.decode("utf-8")) if raw else None
            except ValueError as err:
                return self._send(400, _error_body(NonRetryableError(f"job data is not JSON: {err}")))
            h = self.headers
            if isinstance(fn, _BatchMarker):
                return self._run_batch(fn.fn, data)
            job = Job(
                id=h.get("conveyor-job-id", ""),
                queue=h.get("conveyor-queue", ""),
                data=data,
                attempt=int(h.get("conveyor-attempt") or 1),
                execution_id=h.get("conveyor-execution-id", ""),
                task=h.get("conveyor-task") or None,
                previous_errors=_previous_errors(h.get("conveyor-previous-errors")),
                parents=_parents(h.get("conveyor-parents")),
            )
            ctx = Context(h.get("conveyor-callback-url"), h.get("conveyor-callback-token"),
                          resources=_resources(h.get("conveyor-resources")), parents=job.parents)
            with lock:
                server.active += 1  # type: ignore[attr-defined]
            try:
                self._run(job, ctx)
            except OSError:
                pass  # the worker gave up on this request (timeout, hand-back): nobody to answer
            finally:
                with lock:
                    server.active -= 1  # type: ignore[attr-defined]

        def _run_batch(self, batch_fn: BatchHandler, body: Any) -> None:
            with lock:
                server.active += 1  # type: ignore[attr-defined]
            try:
                try:
                    jobs, contexts = _batch_jobs(body)
                    answer = _batch_outcomes(batch_fn, jobs, contexts)
                except NonRetryableError as err:
                    return self._send(422, _error_body(err))
                except DependencyFailure as err:
                    return self._send(503, _error_body(err), {"conveyor-failure": "dependency"})
                except Exception as err:  # noqa: BLE001 - the call fails: every job of it
                    traceback.print_exc()
                    return self._send(500, _error_body(err))
                self._send(200, answer)
            except OSError:
                pass  # the worker gave up on this request: nobody to answer
            finally:
                with lock:
                    server.active -= 1  # type: ignore[attr-defined]

        def _run(self, job: Job, ctx: Context) -> None:
            try:
                result = fn(job, ctx)
                body = _json.dumps(result).encode("utf-8")
            except NonRetryableError as err:
                return self._send(422, _error_body(err))
            except DependencyFailure as err:
                return self._send(503, _error_body(err), {"conveyor-failure": "dependency"})
            except RateLimited as err:
                headers = {}
                if err.retry_after is not None:
                    headers["retry-after"] = f"{err.retry_after:g}"
                if err.resource is not None:
                    headers["conveyor-resource"] = err.resource
                return self._send(429, _error_body(err), headers)
            except _json.NotJSONError as err:
                return self._send(422, _error_body(NonRetryableError(f"handler result is not JSON: {err}")))
            except Exception as err:  # noqa: BLE001 - every failure is the job's, reported to the worker
                traceback.print_exc()
                return self._send(500, _error_body(err))
            self._send(200, body)

    class Server(ThreadingHTTPServer):
        # SO_REUSEADDR: a restarted sidecar binds the port while this one's connections linger
        allow_reuse_address = True
        daemon_threads = True  # server_close() does not wait for running jobs

    lock = threading.Lock()
    server = Server((host, port), Sidecar)
    server.active = 0  # type: ignore[attr-defined]  # jobs running now (serve() waits for 0)
    return server


#: A batch handler: the jobs of one call and each one's context, in order → one outcome per job.
BatchHandler = Callable[[List[Job], List[Context]], Any]


def batch(fn: BatchHandler) -> BatchHandler:
    """Marks `fn(jobs, contexts)` as a batch handler for the `python:` kind (the worker's own
    process, --handler python:module:fn with --batch-size above 1)."""
    setattr(fn, "conveyor_batch", True)
    return fn


def _batch_jobs(body: Any) -> "tuple[List[Job], List[Context]]":
    """The jobs and contexts of a batch request {"jobs": [{id, queue, data, attempt, executionId,
    task?, previousErrors, callback?, resources?}, …]}; NonRetryableError naming what is wrong."""
    items = body.get("jobs") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise NonRetryableError('a batch request is {"jobs": [...]}')
    jobs: List[Job] = []
    contexts: List[Context] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise NonRetryableError(f"batch job {i} is not an object")
        jobs.append(Job(
            id=str(item.get("id", "")),
            queue=str(item.get("queue", "")),
            data=item.get("data"),
            attempt=int(item.get("attempt") or 1),
            execution_id=str(item.get("executionId", "")),
            task=item.get("task") or None,
            previous_errors=_previous_errors(item.get("previousErrors")),
            parents=_parents(item.get("parents")),
        ))
        callback = item.get("callback") if isinstance(item.get("callback"), dict) else {}
        granted = item.get("resources") if isinstance(item.get("resources"), dict) else {}
        contexts.append(Context(callback.get("url"), callback.get("token"), resources={
            str(k): str(v.get("key") if isinstance(v, dict) else v) for k, v in granted.items()},
            parents=jobs[-1].parents))
    return jobs, contexts


def _batch_outcomes(fn: BatchHandler, jobs: List[Job], contexts: List[Context]) -> bytes:
    """Run `fn` on a batch: the answer {"outcomes": [{"result"} | {"error", "retryable"?}]} as
    JSON. An answer that is not one outcome per job raises (the whole call fails)."""
    answer = fn(jobs, contexts)
    if not isinstance(answer, (list, tuple)) or len(answer) != len(jobs):
        got = f"{len(answer)} outcome(s)" if isinstance(answer, (list, tuple)) else type(answer).__name__
        raise ValueError(f"batch handler answered {got} for {len(jobs)} job(s): "
                         "it must return a list with one outcome per job, in order")
    outcomes: List[Dict[str, Any]] = []
    for outcome in answer:
        if isinstance(outcome, BaseException):
            entry: Dict[str, Any] = {"error": _error_envelope(outcome)}
            if isinstance(outcome, NonRetryableError):
                entry["retryable"] = False
            outcomes.append(entry)
            continue
        try:
            outcomes.append({"result": json.loads(_json.dumps(outcome))})
        except _json.NotJSONError as err:
            outcomes.append({"error": _error_envelope(NonRetryableError(f"handler result is not JSON: {err}")),
                             "retryable": False})
    return json.dumps({"outcomes": outcomes}).encode("utf-8")


def serve_batch(fn: BatchHandler, port: int = 8080, host: str = "127.0.0.1", idle_exit: float = 2.0) -> None:
    """serve() for a batch handler: POST {"jobs": [...]} answers 200 {"outcomes": [...]} (one
    per job, in order: docs/batches.md); a raised exception fails every job of the call (500 with
    the error envelope; 422 for NonRetryableError)."""
    serve(_BatchMarker(fn), port, host, idle_exit)


class _BatchMarker:
    """Tells make_server that `fn` takes batches."""

    def __init__(self, fn: BatchHandler) -> None:
        self.fn = fn

    def __call__(self, job: Job, ctx: Context) -> Any:  # a single job: a batch of one
        outcome = self.fn([job], [ctx])
        if not isinstance(outcome, (list, tuple)) or len(outcome) != 1:
            raise ValueError("batch handler must return a list with one outcome per job")
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]


def make_batch_server(fn: BatchHandler, port: int = 8080, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """The batch sidecar server without running it (tests, or embedding in a program of your own)."""
    return make_server(_BatchMarker(fn), port, host)


def command_batch(fn: BatchHandler) -> None:
    """The main of a command batch handler: {"jobs": [...]} on stdin, {"outcomes": [...]} on
    stdout (docs/batches.md). A raised exception fails every job of the call: exit 65 for
    NonRetryableError, 75 for DependencyFailure, 1 otherwise, with the error envelope on stdout.
    While fn runs, print() goes to stderr."""
    stdout = sys.stdout
    sys.stdout = sys.stderr
    contexts: List[Context] = []
    signal.signal(signal.SIGTERM, lambda *_: [c._stopped.set() for c in contexts])
    try:
        text = sys.stdin.read()
        try:
            body = json.loads(text) if text.strip() else None
        except ValueError as err:
            raise NonRetryableError(f"batch on stdin is not JSON: {err}") from None
        jobs, contexts[:] = _batch_jobs(body)
        answer = _batch_outcomes(fn, jobs, contexts)
    except (NonRetryableError, DependencyFailure) as err:
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        _fail(stdout, err, EX_DATAERR if isinstance(err, NonRetryableError) else EX_TEMPFAIL)
    except Exception as err:  # noqa: BLE001 - every job of the call fails and is retried
        traceback.print_exc()
        _fail(stdout, err, 1)
    finally:
        sys.stdout = stdout
    stdout.write(answer.decode("utf-8"))
    stdout.flush()


def command(fn: Handler) -> None:
    """The main of a command handler: the job data as JSON on stdin, its identity and the
    callback in the environment (CONVEYOR_JOB_ID, CONVEYOR_QUEUE, CONVEYOR_ATTEMPT,
    CONVEYOR_EXECUTION_ID, CONVEYOR_TASK, CONVEYOR_PREVIOUS_ERRORS, CONVEYOR_CALLBACK_URL,
    CONVEYOR_CALLBACK_TOKEN, CONVEYOR_RESOURCES), the
    result as JSON on stdout. Exits 0 on success, 65 for NonRetryableError, 75 for
    DependencyFailure, 1 otherwise (for RateLimited after telling the worker through the callback),
    then with the error envelope on stdout (see _error_body). While fn runs, print() goes to
    stderr so that stdout carries only the result."""
    env = os.environ
    ctx = Context(env.get(HANDLER_ENV_CALLBACK_URL), env.get(HANDLER_ENV_CALLBACK_TOKEN),
                  resources=_resources(env.get(HANDLER_ENV_RESOURCES)))
    # The worker stops a command with SIGTERM (then SIGKILL after its kill grace): ctx.cancelled()
    # tells the handler, which may return early.
    signal.signal(signal.SIGTERM, lambda *_: ctx._stopped.set())
    stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        text = sys.stdin.read()
        try:
            data = json.loads(text) if text.strip() else None
        except ValueError as err:
            raise NonRetryableError(f"job data on stdin is not JSON: {err}") from None
        job = Job(
            id=env.get(HANDLER_ENV_JOB_ID, ""),
            queue=env.get(HANDLER_ENV_QUEUE, ""),
            data=data,
            attempt=int(env.get(HANDLER_ENV_ATTEMPT) or 1),
            execution_id=env.get(HANDLER_ENV_EXECUTION_ID, ""),
            task=env.get(HANDLER_ENV_TASK) or None,
            previous_errors=_previous_errors(env.get(HANDLER_ENV_PREVIOUS_ERRORS)),
            parents=_parents(env.get(HANDLER_ENV_PARENTS)),
        )
        ctx._parents = job.parents or {}
        result = _json.dumps(fn(job, ctx))
    except (NonRetryableError, DependencyFailure, RateLimited) as err:
        if isinstance(err, RateLimited):
            # (told through the callback; the failing exit then benches the key, no attempt used)
            ctx._rate_limited(err)
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        _fail(stdout, err, EX_DATAERR if isinstance(err, NonRetryableError) else
              EX_TEMPFAIL if isinstance(err, DependencyFailure) else 1)
    except _json.NotJSONError as err:
        print(f"handler result is not JSON: {err}", file=sys.stderr)
        _fail(stdout, NonRetryableError(f"handler result is not JSON: {err}"), EX_DATAERR)
    except Exception as err:  # noqa: BLE001 - the attempt fails and is retried
        traceback.print_exc()
        _fail(stdout, err, 1)
    finally:
        sys.stdout = stdout
    stdout.write(result)
    stdout.flush()


def _fail(stdout: Any, err: BaseException, code: int) -> None:
    """A failing command's exit: the error envelope on stdout, which the worker stores as the
    job's error (its stderr is for people)."""
    stdout.write(_error_body(err).decode("utf-8"))
    stdout.flush()
    sys.exit(code)


#: `module.path:function`, as the worker's `python:` handler spec and the WorkerPool schema spell it.
CALLABLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"


def load_callable(spec: str) -> Handler:
    """The function `module.path:function` names, imported (the current directory is on sys.path)."""
    if not re.match(CALLABLE_PATTERN, spec):
        raise ValueError(f"expected module.path:function (e.g. app.handlers:extract), got {spec!r}")
    module_name, _, name = spec.partition(":")
    module = importlib.import_module(module_name)
    fn = getattr(module, name, None)
    if fn is None:
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
    if not callable(fn):
        raise TypeError(f"{spec} is a {type(fn).__name__}, not a function (job, ctx) -> result or a Tasks")
    return fn


def _error_frame(err: BaseException) -> Dict[str, Any]:
    """The error envelope {name, message, stack} (stack: the Python traceback) and how the worker
    treats it: retryable false (NonRetryableError), dependencyFailure, rateLimited."""
    tb = err.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:  # the kit's own frames
        tb = tb.tb_next
    body = _error_envelope(err, tb)
    if isinstance(err, (NonRetryableError, _json.NotJSONError)):
        body["retryable"] = False
    elif isinstance(err, DependencyFailure):
        body["dependencyFailure"] = True
    elif isinstance(err, RateLimited):
        limited: Dict[str, Any] = {}
        if err.retry_after is not None:
            limited["retryAfterMs"] = round(err.retry_after * 1000)
        if err.resource is not None:
            limited["resource"] = err.resource
        body["rateLimited"] = limited
    return body


def serve_stdio(fn: Handler, threads: int = 8) -> None:  # noqa: C901 - one frame loop
    """Serve `fn` to the worker that started this process, over newline-delimited JSON frames:
    requests on stdin, replies on stdout. The worker sends {"id", "job": {id, queue, data, attempt,
    maxAttempts, executionId, createdAt, task?, previousErrors, callback?, resources?}} and {"id", "cancel": true}; this
    answers {"ready": true} once `fn` is loaded, then {"id", "result"} or {"id", "error": {name,
    message, stack, …}} per job. A batch handler (@batch) gets {"id", "batch": [job, …]} and
    answers {"id", "outcomes": [{"result"} | {"error"}, …]} (or {"id", "error"}: the whole call
    failed). Up to `threads` jobs (or batch calls) run at once (an async `fn` runs on one event
    loop instead, and a cancel cancels its task). The handler's own writes to stdout — print(), C
    code, subprocesses — go to stderr, so they cannot corrupt the frames. At the end of stdin the
    running jobs finish and the process exits."""
    frames_in = os.fdopen(os.dup(0), "rb")
    frames_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr
    # The worker decides when this process stops (a terminal's Ctrl-C reaches the worker alone);
    # a worker that dies without closing our input (SIGKILL) takes this process with it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    write_lock = threading.Lock()

    def send(text: str) -> None:
        with write_lock:
            try:
                frames_out.write(text.encode("utf-8") + b"\n")
                frames_out.flush()
            except (OSError, ValueError):
                pass  # the worker is gone: nobody to answer

    def reply(frame_id: Any, job: Job, ctx: Context, outcome: Callable[[], Any]) -> None:
        try:
            text = '{"id":%s,"result":%s}' % (json.dumps(frame_id), _json.dumps(outcome()))
        except _json.NotJSONError as err:
            text = json.dumps({"id": frame_id, "error": _error_frame(NonRetryableError(f"handler result is not JSON: {err}"))})
        except BaseException as err:  # noqa: BLE001 - every failure is the job's, reported to the worker
            if isinstance(err, RateLimited):
                ctx._rate_limited(err)
            text = json.dumps({"id": frame_id, "error": _error_frame(err)})
        finally:
            running.pop(frame_id, None)
        send(text)

    def reply_batch(frame_id: Any, contexts: List[Context], outcome: Callable[[], Any]) -> None:
        try:
            answer = outcome()
            if not isinstance(answer, (list, tuple)) or len(answer) != len(contexts):
                got = f"{len(answer)} outcome(s)" if isinstance(answer, (list, tuple)) else type(answer).__name__
                raise ValueError(f"batch handler answered {got} for {len(contexts)} job(s): "
                                 "it must return a list with one outcome per job, in order")
            outcomes: List[str] = []
            for o in answer:
                if isinstance(o, BaseException):
                    outcomes.append(json.dumps({"error": _error_frame(o)}))
                    continue
                try:
                    outcomes.append('{"result":%s}' % _json.dumps(o))
                except _json.NotJSONError as err:
                    bad = NonRetryableError(f"handler result is not JSON: {err}")
                    outcomes.append(json.dumps({"error": _error_frame(bad)}))
            text = '{"id":%s,"outcomes":[%s]}' % (json.dumps(frame_id), ",".join(outcomes))
        except BaseException as err:  # noqa: BLE001 - the call fails: every job of it
            text = json.dumps({"id": frame_id, "error": _error_frame(err)})
        finally:
            running.pop(frame_id, None)
        send(text)

    running: Dict[Any, Any] = {}  # frame id -> (ctx, future)
    is_async = inspect.iscoroutinefunction(fn)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="job")
    loop = None
    if is_async:
        import asyncio

        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, name="asyncio", daemon=True).start()
    send(json.dumps({"ready": True, "pid": os.getpid()}))
    for line in frames_in:
        try:
            frame = json.loads(line)
            frame_id = frame["id"]
        except (ValueError, KeyError, TypeError):
            print(f"conveyor.handler: ignored a frame that is not {{id, job}} JSON: {line[:200]!r}", file=sys.stderr)
            continue
        if frame.get("cancel"):
            entry = running.get(frame_id)
            if entry:
                for c in entry[0] if isinstance(entry[0], list) else [entry[0]]:
                    c._stopped.set()
                if entry[1] is not None:
                    entry[1].cancel()
            continue
        if "batch" in frame:
            try:
                jobs, contexts = _batch_jobs({"jobs": frame.get("batch")})
            except NonRetryableError as err:
                send(json.dumps({"id": frame_id, "error": _error_frame(err)}))
                continue
            if loop is not None:
                future = asyncio.run_coroutine_threadsafe(fn(jobs, contexts), loop)  # type: ignore[arg-type]
                running[frame_id] = (contexts, future)
                future.add_done_callback(lambda f, i=frame_id, cs=contexts: pool.submit(reply_batch, i, cs, f.result))
            else:
                running[frame_id] = (contexts, None)
                pool.submit(reply_batch, frame_id, contexts, lambda js=jobs, cs=contexts: fn(js, cs))  # type: ignore[arg-type]
            continue
        j = frame.get("job") or {}
        callback = j.get("callback") or {}
        job = Job(
            id=str(j.get("id", "")),
            queue=str(j.get("queue", "")),
            data=j.get("data"),
            attempt=int(j.get("attempt") or 1),
            execution_id=str(j.get("executionId", "")),
            task=j.get("task") or None,
            previous_errors=_previous_errors(j.get("previousErrors")),
            parents=_parents(j.get("parents")),
        )
        ctx = Context(callback.get("url"), callback.get("token"), resources=j.get("resources"), parents=job.parents)
        if loop is not None:
            future = asyncio.run_coroutine_threadsafe(fn(job, ctx), loop)
            running[frame_id] = (ctx, future)
            future.add_done_callback(lambda f, i=frame_id, jb=job, c=ctx: pool.submit(reply, i, jb, c, f.result))
        else:
            running[frame_id] = (ctx, None)
            pool.submit(reply, frame_id, job, ctx, lambda jb=job, c=ctx: fn(jb, c))
    # stdin ended: the worker is stopping this process; let what runs finish.
    while running:
        time.sleep(0.05)
    pool.shutdown(wait=True)


def main(argv: Optional[List[str]] = None) -> int:
    """`python3 -m conveyor.handler --stdio [--threads N] module.path:function`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python3 -m conveyor.handler", description=(
        "Run a Conveyor stage handler for the worker that starts this process (--handler python:…)."))
    parser.add_argument("--stdio", action="store_true", required=True,
                        help="newline-delimited JSON frames on stdin/stdout (the worker's python: handler)")
    parser.add_argument("--threads", type=int, default=8, help="jobs run at once (the worker's slots)")
    parser.add_argument("--batch", action="store_true",
                        help="the worker sends batches (--batch-size above 1): the function must be a @batch handler")
    parser.add_argument("callable", help="module.path:function, imported from the current directory")
    args = parser.parse_args(argv)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        fn = load_callable(args.callable)
        if args.batch and not getattr(fn, "conveyor_batch", False):
            raise TypeError(f"{args.callable} is not a batch handler: the worker sends batches (--batch-size above 1); "
                            "define fn(jobs, contexts) and decorate it with @conveyor.handler.batch")
        if not args.batch and getattr(fn, "conveyor_batch", False):
            fn = _BatchMarker(fn)  # a worker without batches: each job a batch of one
    except BaseException as err:  # noqa: BLE001 - told to the worker, which refuses to start
        traceback.print_exc()
        sys.stdout.write(json.dumps({"fatal": _error_frame(err)}) + "\n")
        sys.stdout.flush()
        return 1
    serve_stdio(fn, args.threads)
    return 0


if __name__ == "__main__":
    # Through the package module, so the handler's `from conveyor.handler import NonRetryableError`
    # is the class this process checks for (not a copy in __main__).
    from conveyor.handler import main as _main

    sys.exit(_main())
