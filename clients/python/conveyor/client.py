"""The producer and read side of a Conveyor queue over redis-py: the same Lua scripts, the same
arguments and the same defaults as the TypeScript producer (queue/producer.ts), so a job
enqueued here is stored exactly as one enqueued from TypeScript (docs/protocol.md)."""

import hashlib
import json
import math
import os
import re
import ssl
import sys
import time
import secrets
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union
from urllib.parse import parse_qs, unquote

import redis
from redis.exceptions import NoScriptError, ResponseError

from . import _admin, _gateway, _json
from ._gateway import ENQUEUE_OPTIONAL_FIELDS, enqueue_record_args
from ._admin import (
    UNSET,
    DeadLetter,
    InvalidArgumentError,
    QueueControl,
    QueueGroups,
    RateLimit,
    ResourceLimit,
    ResourceState,
    Schedule,
)
from ._contracts import TASK_NAME, CompiledContract, ContractUnavailable, contract_changed, describe, job_violations
from ._keys import PIPELINES_KEY, QUEUES_KEY, PipelineKeys, QueueKeys, check_job_id, check_queue
from ._scripts import script_source

DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024
DEFAULT_ATTEMPTS = 3
IDEMPOTENCY_TTL_SECONDS = 24 * 3600
#: How long a cancelled job's record stays readable (as queue/control.ts's CANCELLED_RETENTION_SECONDS).
CANCELLED_RETENTION_SECONDS = 24 * 3600
#: Jobs per script call in enqueue_many (as the TypeScript producer: amortised, never blocking Redis long).
BULK_CHUNK = 500

Duration = Union[int, float, timedelta]

#: Seconds to set up a connection (TCP, and a rediss:// URL's TLS handshake) and to wait for any one
#: reply, unless from_url is given others (None: no limit): a wrong URL fails instead of hanging.
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_SOCKET_TIMEOUT = 30.0


class InvalidJobError(ValueError):
    """A job the protocol refuses (bad priority, attempts, delay, timeout, data that is not JSON)."""


class PayloadTooLargeError(InvalidJobError):
    """The job's data is larger than the producer's limit (512 KiB unless configured)."""


class ContractViolation(InvalidJobError):
    """Jobs whose data breaks the queue's contract; nothing of the call was enqueued. `.jobs`: one
    entry per bad job, {"index", "id"?, "task"?, "side": "data", "violations": [{"pointer",
    "rule", "message", "value"?}]} (as the TypeScript producer's and the HTTP API's 422)."""

    def __init__(self, queue: str, contract_hash: str, jobs: List[Dict[str, Any]]) -> None:
        super().__init__(f"{queue}: {len(jobs)} job(s) break the stage's contract ({contract_hash}): {describe(jobs)}")
        self.queue = queue
        self.hash = contract_hash
        self.jobs = jobs


class LayoutRefusedError(RuntimeError):
    """The pipeline's layout in force is newer than this client reads: it refuses to write jobs a
    reader would misread (docs/protocol.md, "The layout in force")."""

    def __init__(self, pipeline: str, in_force: int, reads: Tuple[int, int], first_version: Optional[str]) -> None:
        from . import __version__

        span = str(reads[0]) if reads[0] == reads[1] else f"{reads[0]}..{reads[1]}"
        super().__init__(
            f"pipeline {pipeline} is on layout {in_force}; this Conveyor {__version__} reads layouts {span}: "
            f"upgrade to {first_version or 'a newer release'} or later, which reads layout {in_force}"
        )
        self.pipeline = pipeline
        self.in_force = in_force
        self.reads = reads
        self.first_version = first_version


#: How long a client trusts the layout in force it read (a finalize is seen within it).
LAYOUT_RECHECK_SECONDS = 30.0


def readable_layouts(env: Mapping[str, str] = os.environ) -> Tuple[int, int]:
    """The layouts this client reads: layouts 1..2, or CONVEYOR_LAYOUTS (`<min>..<max>`, for upgrade tests)."""
    raw = env.get("CONVEYOR_LAYOUTS", "")
    if not raw:
        return (1, 2)
    m = re.fullmatch(r"(\d+)\.\.(\d+)", raw.strip())
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < int(m.group(1)):
        raise ValueError(f"CONVEYOR_LAYOUTS must be <min>..<max> with 1 <= min <= max, got {raw!r}")
    return (int(m.group(1)), int(m.group(2)))


def _layout_refusal(pipeline: str, raw: Mapping[Any, Any]) -> Optional[LayoutRefusedError]:
    fields = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v) for k, v in raw.items()}
    try:
        in_force = int(fields.get("inForce") or 1)
    except ValueError:
        in_force = 1
    reads = readable_layouts()
    if in_force <= reads[1]:
        return None
    return LayoutRefusedError(pipeline, in_force, reads, fields.get("firstVersion") or None)


class _LayoutChecks:
    """When each pipeline's layout in force was last read."""

    def __init__(self) -> None:
        self.read_at: Dict[str, float] = {}

    def due(self, pipeline: str) -> bool:
        at = self.read_at.get(pipeline)
        return at is None or time.monotonic() - at >= LAYOUT_RECHECK_SECONDS

    def read(self, pipeline: str, raw: Mapping[Any, Any]) -> None:
        refusal = _layout_refusal(pipeline, raw)
        if refusal:
            raise refusal
        self.read_at[pipeline] = time.monotonic()


class ContractChangedError(RuntimeError):
    """The queue's contract changed again while this call re-read it: nothing was enqueued; try again."""


class JSONStringDataWarning(UserWarning):
    """A job's data is a str holding a JSON object (json.dumps output?): the handler gets that
    string, not the object. Client(refuse_json_strings=True) refuses such data instead."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _warn_caller(message: str) -> None:
    """Warn at the first frame outside this package: the caller's enqueue line."""
    level, frame = 1, sys._getframe(0)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _PACKAGE_DIR:
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    warnings.warn(message, JSONStringDataWarning, stacklevel=level)


def _holds_json_object(data: str) -> bool:
    text = data.lstrip()
    if not text.startswith("{"):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


#: What a job of enqueue_many is, for the errors that find something else.
_JOB_SHAPE = 'each job is a mapping {"data": …} with enqueue()\'s options (priority, id, …)'


class Enqueued(NamedTuple):
    id: str
    #: False when the id, the idempotency key or a throttle key already existed (nothing was
    #: written), or a debounce replaced the waiting job's data.
    created: bool
    #: True when a debounce gave the waiting job with its key this job's data (id: that job's).
    replaced: bool = False


@dataclass
class JobStage:
    """One stage of a job (docs/protocol.md, "Stages"), in the order it reached them, the current
    one last. Redis keeps only an earlier stage's attempts: its result is in the PostgreSQL records
    (`GET /jobs/{id}`, `conveyor job --database`)."""

    queue: str
    #: "completed" for an earlier stage; the job's state for its current one.
    state: str
    #: Attempts that ran to an outcome (failed or succeeded); stalls and hand-backs are apart.
    attempts: int
    result: Any = None
    error: Optional[Any] = None
    started_at: Optional[int] = None
    finished_at: Optional[int] = None


@dataclass
class Job:
    """A job record (docs/protocol.md, "Job record fields"), JSON fields decoded."""

    id: str
    queue: str
    state: str
    data: Any
    priority: int
    attempts: int
    #: Attempts of the current stage that ran to an outcome: the failed ones and, once completed,
    #: the one that succeeded (also those before a dead-letter retry). A stage advance starts at 0.
    attempts_made: int
    stalls: int
    handbacks: int
    created_at: int
    started_at: Optional[int] = None
    finished_at: Optional[int] = None
    result: Any = None
    error: Optional[Any] = None
    dead_reason: Optional[str] = None
    progress: Optional[float] = None
    progress_message: Optional[str] = None
    worker: Optional[str] = None
    #: The stages the job went through, the current one last.
    stages: List[JobStage] = field(default_factory=list)
    #: Every field as stored.
    raw: Dict[str, str] = field(default_factory=dict)


class Cancelled(NamedTuple):
    id: str
    #: "cancelled" (it was waiting, delayed, running or a fan-out parent), "finished" (completed,
    #: dead or cancelled before: nothing changed) or "notFound".
    outcome: str
    #: What the job was (ready, delayed, active, fannedOut, joined), or its final state.
    state: str
    queue: str
    #: Jobs cancelled: 1, or for a fan-out parent its unfinished children (and join).
    jobs_cancelled: int


@dataclass
class LogLine:
    at: int
    execution_id: str
    message: str


@dataclass
class Event:
    #: Stream id: the events of a queue are totally ordered (the jobs of a batch entry share it).
    event_id: str
    type: str
    id: str
    queue: str
    at: int
    fields: Dict[str, str]
    #: The job's place in its batch entry (0 for an entry of one job): (event_id, part) is unique.
    part: int = 0

    @property
    def cursor(self) -> str:
        """Where to resume after this event: pass it as `since` (the API's SSE id, the same form)."""
        return self.event_id if self.part == 0 else f"{self.event_id}/{self.part}"


class _Script:
    """A published script run by SHA, falling back to EVAL (after a restart, on a new cluster node)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = script_source(name)
        self.sha = hashlib.sha1(self.source.encode("utf-8")).hexdigest()

    def __call__(self, client: Any, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return client.eval(self.source, len(keys), *keys, *args)


def _ms(value: Optional[Duration], what: str) -> int:
    if value is None:
        return 0
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise InvalidJobError(f"{what} must be a number of seconds ≥ 0 (or a timedelta), got {value!r}")
    return int(math.floor(seconds * 1000 + 0.5))  # Math.round, as the TypeScript producer


def _integer(value: Any, default: int, low: int, high: int, what: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidJobError(f"{what} must be an integer {low}..{high}, got {value!r}")
    return value


def _split_url(url: str, scheme: str, password: Optional[str]) -> Tuple[str, str, Optional[str], Optional[str]]:
    """`scheme://[user:pass@]rest[?query]` as (rest, query, username, password); the URL's password wins."""
    rest, _, query = url[len(scheme) :].partition("?")
    username = None
    if "@" in rest:
        cred, rest = rest.rsplit("@", 1)
        user, _, pw = cred.partition(":")
        username = unquote(user) or None
        password = unquote(pw) or password
    return rest, query, username, password


def _cluster_target(url: str, password: Optional[str]) -> Tuple[List[Tuple[str, int]], Dict[str, Any]]:
    """The nodes and options of `redis-cluster://[user:pass@]host:port,host:port[?tls=true]`."""
    rest, query, username, password = _split_url(url, "redis-cluster://", password)
    nodes = []
    for hp in rest.strip("/").split(","):
        host, _, port = hp.strip().rpartition(":") if ":" in hp else (hp.strip(), "", "6379")
        nodes.append((host.strip("[]"), int(port)))
    tls = parse_qs(query).get("tls", ["false"])[0] == "true"
    return nodes, {"username": username, "password": password, "ssl": tls, "decode_responses": True}


_SENTINEL_OPTIONS = {"tls", "sentinelAuth", "db"}


def _sentinel_target(url: str, password: Optional[str]) -> Tuple[List[Tuple[str, int]], str, Dict[str, Any], Dict[str, Any]]:
    """The sentinels, master name, data-node options and sentinel options of
    `redis-sentinel://[user:pass@]host:port,host:port/<master-name>[?tls=true&sentinelAuth=same&db=N]`
    (docs/reliability.md); a bad URL raises ValueError naming it (password masked)."""
    shown = re.sub(r"//([^:@/]*):[^@/]*@", r"//\1:***@", url)
    rest, query, username, password = _split_url(url, "redis-sentinel://", password)
    hosts, _, master = rest.partition("/")
    master = unquote(master)
    if not master or "/" in master:
        raise ValueError(
            f"invalid Redis URL {shown}: a redis-sentinel:// URL names the primary: "
            "redis-sentinel://host:port,host:port/<master-name>"
        )
    params = parse_qs(query, keep_blank_values=True)
    for key in params:
        if key not in _SENTINEL_OPTIONS:
            raise ValueError(f"unknown option {key} in {shown}: expected tls, sentinelAuth or db")
    tls = params.get("tls", ["false"])[0]
    if tls not in ("true", "false"):
        raise ValueError(f"invalid tls={tls} in {shown}: expected true or false")
    auth = params.get("sentinelAuth", ["none"])[0]
    if auth not in ("none", "same"):
        raise ValueError(
            f"invalid sentinelAuth={auth} in {shown}: expected none (sentinels without a password) "
            "or same (the data nodes' user and password)"
        )
    db = params.get("db", ["0"])[0]
    if not db.isdigit():
        raise ValueError(f"invalid db={db} in {shown}: expected a number")
    nodes = []
    for hp in hosts.split(","):
        host, _, port = hp.strip().rpartition(":") if ":" in hp else (hp.strip(), "", "26379")
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"invalid Redis host {hp!r} in {shown}")
        nodes.append((host.strip("[]"), int(port)))
    ssl = tls == "true"
    data = {"username": username, "password": password, "ssl": ssl, "db": int(db), "decode_responses": True}
    sentinel: Dict[str, Any] = {"ssl": ssl}
    if auth == "same":
        sentinel.update(username=username, password=password)
    return nodes, master, data, sentinel


def _shown_url(url: str) -> str:
    """The URL as an error message may show it: the password masked (user:***@, password=***)."""
    shown = re.sub(r"//([^:@/]*):[^/]*@", r"//\1:***@", url, count=1)
    return re.sub(r"([?&]password=)[^&]*", r"\1***", shown)


def _connect_error(err: Exception, url: str, connect_timeout: Optional[float]) -> Exception:
    """redis-py's failure to connect, as the same exception class naming the URL (password
    masked) and the likely cause."""
    tls = url.startswith("rediss://")
    cause = err.__context__
    if isinstance(err, redis.exceptions.TimeoutError):
        within = f"within {connect_timeout:g} s (socket_connect_timeout)" if connect_timeout else "in time"
        why = (
            f"no TLS handshake {within}: the server is likely not serving TLS (a plain Redis never "
            "answers one); use redis:// for it"
            if tls
            else f"no connection {within}: is the host reachable, and the port Redis's?"
        )
    elif tls and isinstance(cause, ssl.SSLError):
        why = f"the TLS handshake failed ({cause}): the server is likely not serving TLS; use redis:// for it"
    elif isinstance(cause, ConnectionRefusedError):
        why = "connection refused: nothing listens there (a wrong port, or Redis is down)"
    else:
        why = str(err)
    try:
        return type(err)(f"cannot connect to Redis at {_shown_url(url)}: {why}")
    except Exception:  # noqa: BLE001 - an exception class with another constructor: as it was
        return err


def _explaining(base: type, url: str, use_asyncio: bool) -> type:
    """`base` (redis-py's connection class for the URL) whose connect failures name the URL and
    the likely cause, and whose TLS handshake is bounded by the connect timeout, not the socket
    timeout (a handshake with a plain Redis otherwise waits for the first reply's timeout)."""
    failures = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
    if use_asyncio:  # (redis.asyncio bounds the handshake by the connect timeout itself)

        class AsyncExplained(base):  # type: ignore[misc,valid-type]
            async def connect(self) -> None:
                try:
                    await super().connect()
                except failures as err:
                    raise _connect_error(err, url, self.socket_connect_timeout) from err

        return AsyncExplained

    class Explained(base):  # type: ignore[misc,valid-type]
        def _connect(self) -> Any:
            if not isinstance(self, redis.connection.SSLConnection):
                return super()._connect()
            timeout = self.socket_timeout
            self.socket_timeout = self.socket_connect_timeout
            try:
                sock = super()._connect()
            finally:
                self.socket_timeout = timeout
            sock.settimeout(timeout)
            return sock

        def connect(self) -> None:
            try:
                super().connect()
            except failures as err:
                raise _connect_error(err, url, self.socket_connect_timeout) from err

    return Explained


def _socket_timeout(client: Any) -> Optional[float]:
    """The client's socket timeout (single node, sentinel or cluster), None when it has none."""
    pool = getattr(client, "connection_pool", None) or getattr(client, "nodes_manager", None)
    return (getattr(pool, "connection_kwargs", None) or {}).get("socket_timeout")


def _block_ms(client: Any, block: float) -> int:
    """XREAD's BLOCK for `block` seconds, kept within half the socket timeout: a longer block
    would time the read out (the follow loop asks again, so nothing is lost)."""
    ms = max(1, int(block * 1000))
    timeout = _socket_timeout(client)
    return min(ms, max(1, int(timeout * 500))) if timeout else ms


def _redis_from_url(url: str, password: Optional[str] = None, *, use_asyncio: bool = False, **kwargs: Any) -> Any:
    """`redis://`, `rediss://`, `redis-cluster://host:port,host:port[?tls=true]` and
    `redis-sentinel://host:port,host:port/<master-name>[?…]`, as the TypeScript side reads them;
    the password from the URL, else REDIS_PASSWORD. Sentinel: redis-py's own Sentinel client, which
    asks the sentinels for the primary on every new connection (a failover is followed).
    socket_connect_timeout and socket_timeout default to DEFAULT_CONNECT_TIMEOUT and
    DEFAULT_SOCKET_TIMEOUT (None: no limit); a redis:// or rediss:// connection that fails says
    which URL and why."""
    password = password if password is not None else os.environ.get("REDIS_PASSWORD") or None
    kwargs.setdefault("socket_connect_timeout", DEFAULT_CONNECT_TIMEOUT)
    kwargs.setdefault("socket_timeout", DEFAULT_SOCKET_TIMEOUT)
    if use_asyncio:
        import redis.asyncio as lib
        from redis.asyncio.cluster import ClusterNode, RedisCluster
    else:
        lib = redis  # type: ignore[no-redef]
        from redis.cluster import ClusterNode, RedisCluster  # type: ignore[no-redef,assignment]
    if url.startswith("redis-cluster://"):
        nodes, options = _cluster_target(url, password)
        return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in nodes], **options, **kwargs)
    if url.startswith("redis-sentinel://"):
        sentinels, master, data, sentinel_kwargs = _sentinel_target(url, password)
        if use_asyncio:
            from redis.asyncio.sentinel import Sentinel
        else:
            from redis.sentinel import Sentinel  # type: ignore[assignment]
        for timeout in ("socket_connect_timeout", "socket_timeout"):  # the sentinels' own connections too
            sentinel_kwargs[timeout] = kwargs[timeout]
        return Sentinel(sentinels, sentinel_kwargs=sentinel_kwargs).master_for(master, **data, **kwargs)
    client = lib.Redis.from_url(url, decode_responses=True, **kwargs)
    pool = client.connection_pool
    pool.connection_class = _explaining(pool.connection_class, url, use_asyncio)
    if password and not client.connection_pool.connection_kwargs.get("password"):
        client.connection_pool.connection_kwargs["password"] = password
    return client


def _number(raw: Optional[str]) -> Optional[float]:
    if raw is None or raw == "":
        return None
    try:
        return float(raw)
    except ValueError:
        return None


def _int(raw: Optional[str], default: Optional[int] = 0) -> Optional[int]:
    n = _number(raw)
    return default if n is None else int(n)


def _decode(raw: Optional[str]) -> Any:
    if raw is None or raw == "":
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


_JOB_OPTIONS = {"data", "id", "idempotency_key", "priority", "delay", "attempts", "timeout", "content_hash", "trace", "group",
                "dedupe", "uses", "task", "notify"}

#: A group's longest name in UTF-8 bytes (docs/protocol.md, "Groups"; queue/groups.ts GROUP_MAX_BYTES).
GROUP_MAX_BYTES = 128
#: The job record's optional fields as enqueue_jobs takes them (queue/producer.ts EnqueueRecord):
#: a call sends `id,data` and each of these that a job of it has, by name.
#: The job ends a notification may be asked for (docs/notifications.md).
NOTIFY_EVENTS = ("completed", "dead", "cancelled")
#: A dedupe key's longest length and a dedupe window's longest (queue/producer.ts).
DEDUPE_KEY_MAX = 500
DEDUPE_WINDOW_MAX_MS = 7 * 24 * 3_600_000


def _encode_dedupe(dedupe: Any, delay_ms: int, which: str) -> str:
    """`<mode>:<windowMs>:<key>` as enqueue_jobs takes it (docs/protocol.md, "Debounce and
    throttle"); `dedupe` is {"key", "mode": "debounce"|"throttle", "window": seconds or timedelta}."""
    if not isinstance(dedupe, Mapping) or set(dedupe) - {"key", "mode", "window"}:
        raise InvalidJobError(f"{which}: dedupe must be a mapping with key, mode and window")
    mode, key = dedupe.get("mode"), dedupe.get("key")
    if mode not in ("debounce", "throttle"):
        raise InvalidJobError(f"{which}: dedupe.mode must be debounce or throttle, got {mode!r}")
    if not isinstance(key, str) or key == "" or len(key) > DEDUPE_KEY_MAX:
        raise InvalidJobError(f"{which}: dedupe.key must be a string of 1..{DEDUPE_KEY_MAX} characters")
    window_ms = _ms(dedupe.get("window"), "dedupe.window")
    if not 1 <= window_ms <= DEDUPE_WINDOW_MAX_MS:
        raise InvalidJobError(f"{which}: dedupe.window must be 1 ms..7 days, got {dedupe.get('window')!r}")
    if mode == "debounce" and delay_ms > 0:
        raise InvalidJobError(f"{which}: a debounced job waits dedupe.window; delay must be 0")
    return f"{mode}:{window_ms}:{key}"


_RESOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_UNIT = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def _check_uses(uses: Any, which: str) -> str:
    """A job's `uses` ({resource: {unit: amount}}, docs/protocol.md "Resources") as the JSON the
    TypeScript producer sends (resources sorted), '' for none; InvalidJobError naming the field."""
    if uses is None:
        return ""
    if not isinstance(uses, Mapping):
        raise InvalidJobError(f"{which}: uses must be a mapping {{resource: {{unit: amount}}}}, got {uses!r}")
    if len(uses) > 8:
        raise InvalidJobError(f"{which}: uses names {len(uses)} resources, limit 8")
    out: Dict[str, Dict[str, int]] = {}
    for name in sorted(uses):
        if not isinstance(name, str) or not _RESOURCE_NAME.match(name):
            raise InvalidJobError(f"{which}: uses: resource {name!r} is invalid")
        units = uses[name] or {}
        if not isinstance(units, Mapping):
            raise InvalidJobError(f"{which}: uses.{name} must be a mapping {{unit: amount}}")
        amounts: Dict[str, int] = {}
        for unit, amount in units.items():
            if not isinstance(unit, str) or not _UNIT.match(unit):
                raise InvalidJobError(f"{which}: uses.{name}: unit {unit!r} is invalid")
            if isinstance(amount, bool) or not isinstance(amount, int) or not 0 <= amount <= 10**12:
                raise InvalidJobError(f"{which}: uses.{name}.{unit} must be an integer 0..10^12, got {amount!r}")
            if unit == "requests":
                if amount != 1:
                    raise InvalidJobError(f"{which}: uses.{name}.requests: a job uses 1 request; leave it out")
                continue
            amounts[unit] = amount
        out[name] = amounts
    return json.dumps(out, separators=(",", ":")) if out else ""


def _encode_job(
    job: Mapping[str, Any], index: int, max_payload_bytes: int, refuse_json_strings: bool = False
) -> List[Any]:
    """The 10 script arguments of one job (docs/protocol.md, "Enqueueing from another language";
    the 10th, the group, '' for none, is sent only in a batch with a grouped job), checked as the
    TypeScript producer checks them; InvalidJobError naming the job otherwise. Data that is a str
    holding a JSON object warns (JSONStringDataWarning), or is refused with refuse_json_strings."""
    if not isinstance(job, Mapping):
        shown = repr(job)
        shown = shown if len(shown) <= 80 else shown[:80] + "…"
        raise InvalidJobError(f'job at index {index} must be a mapping {{"data": …}}, got {type(job).__name__} {shown}')
    job_id = job.get("id")
    which = f"job {job_id}" if job_id is not None else f"job at index {index}"
    unknown = set(job) - _JOB_OPTIONS
    if unknown and "data" not in job:
        raise InvalidJobError(
            f"{which}: unknown option(s) {', '.join(sorted(map(str, unknown)))} and no data: is this the "
            f"data itself? {_JOB_SHAPE}: [{{\"data\": d}} for d in items]"
        )
    if unknown:
        raise InvalidJobError(f"{which}: unknown option(s) {', '.join(sorted(map(str, unknown)))}")
    if "data" not in job:
        raise InvalidJobError(f"{which}: data is required: {_JOB_SHAPE}; data is any JSON value")
    if isinstance(job["data"], str) and _holds_json_object(job["data"]):
        message = (
            f"{which}: data is a str holding a JSON object (json.dumps output?): the handler gets "
            "that string, not the object; pass the dict itself"
        )
        if refuse_json_strings:
            raise InvalidJobError(message)
        _warn_caller(message)
    job_id = check_job_id(job_id) if job_id is not None else new_job_id()
    try:
        data = _json.dumps(job["data"])
    except _json.NotJSONError as err:
        raise InvalidJobError(f"{which}: data is not JSON-serializable: {err}") from None
    size = len(data.encode("utf-8"))
    if size > max_payload_bytes:
        raise PayloadTooLargeError(
            f"job {job_id} is {size} bytes, limit {max_payload_bytes} "
            "(store large inputs elsewhere and enqueue a reference)"
        )
    priority = _integer(job.get("priority"), 0, 0, 1000, "priority")
    attempts = _integer(job.get("attempts"), DEFAULT_ATTEMPTS, 1, 1000, "attempts")
    delay_ms = _ms(job.get("delay"), "delay")
    timeout_ms = _ms(job.get("timeout"), "timeout")
    idem = job.get("idempotency_key") or ""
    content_hash = job.get("content_hash") or ""
    # The W3C trace context of the enqueue (`traceparent`, optionally a `tracestate` line):
    # this client does not trace, but passes one a caller has (an OpenTelemetry span's).
    trace = job.get("trace") or ""
    if not isinstance(idem, str) or not isinstance(content_hash, str) or not isinstance(trace, str):
        raise InvalidJobError(f"{which}: idempotency_key, content_hash and trace must be strings")
    group = job.get("group")
    if group is not None:
        if not isinstance(group, str) or group == "":
            raise InvalidJobError(f"{which}: group must be a non-empty string, got {group!r}")
        group_bytes = len(group.encode("utf-8"))
        if group_bytes > GROUP_MAX_BYTES:
            raise InvalidJobError(f"{which}: group is {group_bytes} bytes, limit {GROUP_MAX_BYTES}")
    dedupe = job.get("dedupe")
    dedupe_field = "" if dedupe is None else _encode_dedupe(dedupe, delay_ms, which)
    uses = _check_uses(job.get("uses"), which)
    task = job.get("task")
    if task is not None and (not isinstance(task, str) or not TASK_NAME.match(task)):
        raise InvalidJobError(
            f"{which}: task must be 1..100 characters of A-Z a-z 0-9 . _ - starting with a letter or digit, got {task!r}"
        )
    notify = _check_notify(job.get("notify"), which)
    record: Dict[str, Any] = {"id": job_id, "data": data, "attempts": attempts}
    optional = {"priority": priority, "delayMs": delay_ms, "timeoutMs": timeout_ms, "idempotencyKey": idem,
                "contentHash": content_hash, "trace": trace, "group": group or "", "dedupe": dedupe_field, "uses": uses,
                "task": task or "", "notify": notify}
    record.update((name, value) for name, value in optional.items() if value)
    return record


_ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def new_job_id() -> str:
    """A new job id as the TypeScript producer makes it: 20 random base-62 characters (a
    waiting job carries its id three times, so shorter than a UUID; docs/protocol.md)."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(20))


def _check_notify(notify: Any, which: str) -> str:
    """A job's own notify as enqueue_jobs takes it: JSON {url, events} ('' for none). The secret
    is the pool's: a job never carries one."""
    if notify is None:
        return ""
    if not isinstance(notify, Mapping):
        raise InvalidJobError(f"{which}: notify must be a mapping {{url, events}}")
    extra = set(notify) - {"url", "events"}
    if extra:
        raise InvalidJobError(
            f"{which}: notify takes url and events only (the secret is the pool's), got {', '.join(sorted(map(str, extra)))}"
        )
    url = notify.get("url")
    if not isinstance(url, str) or not re.match(r"^https?://\S+$", url):
        raise InvalidJobError(f"{which}: notify.url must be an http:// or https:// URL, got {url!r}")
    events = notify.get("events", list(NOTIFY_EVENTS))
    if (isinstance(events, (str, bytes)) or not isinstance(events, Sequence) or len(events) == 0
            or any(e not in NOTIFY_EVENTS for e in events)):
        raise InvalidJobError(
            f"{which}: notify.events must be a non-empty list of {', '.join(NOTIFY_EVENTS)}, got {events!r}"
        )
    return json.dumps({"url": url, "events": list(dict.fromkeys(events))}, separators=(",", ":"))


def _one_job(data: Any, **options: Any) -> Dict[str, Any]:
    return {"data": data, **options}


class _Batch(NamedTuple):
    """One enqueue call's jobs, checked and encoded: the script calls are made from `records`."""

    queue: str
    keys: QueueKeys
    jobs: List[Mapping[str, Any]]
    records: List[Dict[str, Any]]
    max_payload_bytes: int

    def script(self, start: int, contract_hash: str) -> "_gateway.Script":
        """The script call of the chunk at `start` (BULK_CHUNK jobs)."""
        return _gateway.enqueue_jobs(
            self.keys,
            max_payload_bytes=self.max_payload_bytes,
            idempotency_ttl_seconds=IDEMPOTENCY_TTL_SECONDS,
            records=self.records[start : start + BULK_CHUNK],
            contract_hash=contract_hash,
        )


def _enqueue_batch(
    queue: str, jobs: Iterable[Mapping[str, Any]], max_payload_bytes: int, refuse_json_strings: bool = False
) -> _Batch:
    """The keys and the checked records of an enqueue call (BULK_CHUNK jobs per script call);
    every job is checked first, so a bad one refuses the batch before anything reaches Redis."""
    check_queue(queue)
    if isinstance(jobs, (Mapping, str, bytes)):
        raise InvalidJobError(
            f"enqueue_many takes a list of jobs, got a {type(jobs).__name__}: {_JOB_SHAPE} "
            "(for one job: enqueue(queue, data, …))"
        )
    keys = QueueKeys(queue)
    jobs = list(jobs)
    encoded = [_encode_job(job, i, max_payload_bytes, refuse_json_strings) for i, job in enumerate(jobs)]
    return _Batch(queue, keys, jobs, encoded, max_payload_bytes)


#: A queue whose contract this client has not read yet: sent as having none (the script says otherwise).
_UNREAD = object()


def _stored_contract(reply: Sequence[Any]) -> Optional[Tuple[str, Any]]:
    """HMGET <Q>contract hash body as (hash, contract), or None when the queue has none."""
    hash_, body = reply
    return (hash_, json.loads(body)) if hash_ and body else None


class _Contracts:
    """The queues' contracts as last read, compiled once per hash (IO is the client's)."""

    def __init__(self) -> None:
        self.by_queue: Dict[str, Any] = {}
        self.by_hash: Dict[str, CompiledContract] = {}

    def known(self, queue: str) -> Optional[CompiledContract]:
        c = self.by_queue.get(queue, _UNREAD)
        return None if c is _UNREAD else c

    def store(self, queue: str, stored: Optional[Tuple[str, Any]]) -> Optional[CompiledContract]:
        compiled = None
        if stored:
            compiled = self.by_hash.get(stored[0]) or CompiledContract(stored[0], stored[1])
            self.by_hash[stored[0]] = compiled
        self.by_queue[queue] = compiled
        return compiled


def _changed_again(queue: str, in_force: str) -> str:
    return f"{queue}: the contract changed again while this call read it (in force: {in_force or 'none'}); nothing of this chunk was enqueued"


def _refuse(batch: _Batch, contract: Optional[CompiledContract], start: int = 0) -> None:
    bad = job_violations(contract, batch.jobs, batch.records, start)
    if bad:
        raise ContractViolation(batch.queue, contract.hash if contract else "", bad)


def _cancelled(job_id: str, reply: Sequence[Any]) -> Cancelled:
    return Cancelled(job_id, *_gateway.cancel_reply(reply))


def _enqueued(reply: Sequence[Any]) -> List[Enqueued]:
    # (2: a debounce replaced the waiting job's data)
    return [Enqueued(job_id, code == 1, code == 2) for job_id, code in _gateway.enqueue_reply(reply)]


def _payload_error(err: ResponseError) -> Exception:
    text = str(err)
    if "ERR_PAYLOAD_TOO_LARGE" in text:
        return PayloadTooLargeError(text.split("ERR_PAYLOAD_TOO_LARGE ", 1)[-1])
    return err


def _stages(job: Job) -> List[JobStage]:
    """The finished stages from `stages` (`queue=attempts …`, written by the stage advance), then
    the current one."""
    out = []
    for entry in (job.raw.get("stages") or "").split(" "):
        queue, eq, attempts = entry.rpartition("=")
        if queue and eq:
            out.append(JobStage(queue, "completed", _int(attempts) or 0))
    out.append(JobStage(
        job.queue,
        job.state,
        job.attempts_made,
        result=job.result if job.state == "completed" else None,
        error=job.error,
        started_at=job.started_at,
        finished_at=job.finished_at,
    ))
    return out


def _job(job_id: str, raw: Dict[str, str]) -> Job:
    job = Job(
        id=raw.get("id", job_id),
        queue=raw.get("queue", ""),
        state=raw.get("state", "unknown"),
        data=_decode(raw.get("data")),
        priority=_int(raw.get("priority")) or 0,
        attempts=_int(raw.get("attempts")) or 0,
        # (a dead-letter retry gives a fresh budget; the attempts before it still ran)
        attempts_made=(_int(raw.get("attemptsMade")) or 0) + (_int(raw.get("attemptsBefore")) or 0),
        stalls=_int(raw.get("stalls")) or 0,
        handbacks=_int(raw.get("handbacks")) or 0,
        created_at=_int(raw.get("createdAt")) or 0,
        started_at=_int(raw.get("startedAt"), None),
        finished_at=_int(raw.get("finishedAt"), None),
        result=_decode(raw.get("result")),
        error=_decode(raw.get("error")),
        dead_reason=raw.get("deadReason") or None,
        progress=_number(raw.get("progress")),
        progress_message=raw.get("progressMessage") or None,
        worker=raw.get("worker") or None,
        raw=raw,
    )
    job.stages = _stages(job)
    return job


def _log_lines(lines: Sequence[str]) -> List[LogLine]:
    out = []
    for text in lines:
        v = _decode(text)
        if isinstance(v, dict):
            out.append(LogLine(int(v.get("at", 0)), str(v.get("executionId", "")), str(v.get("message", ""))))
        else:
            out.append(LogLine(0, "", text))
    return out


def _stats_calls(queue: str) -> List[_admin.Call]:
    k = QueueKeys(queue)
    C = _admin.Call
    # ready = the prioritised sorted set + the line of priority-0 jobs - its stale entries
    # (docs/protocol.md, "Ready jobs") + every group's waiting jobs (readyCount in readyLine.lua)
    return [
        C("zcard", (k.ready,)),
        C("llen", (k.line,)),
        C("get", (k.line_stale,)),
        C("zcard", (k.delayed,)),
        C("zcount", (k.delayed, "-inf", int(time.time() * 1000))),
        C("zcard", (k.inflight,)),
        C("zcard", (k.dead,)),
        C("hget", (k.counts, "completed")),
        C("hget", (k.group_waiting, "")),  # every group's waiting jobs (docs/protocol.md, "Groups")
        C("hkeys", (k.group_budget,)),  # groups waiting for a resource's budget (docs/protocol.md, "Resources")
    ]


def _budget_groups(replies: Sequence[Any]) -> List[str]:
    """The groups waiting for budget (the stats pipeline's last reply), when grouped jobs wait."""
    return list(replies[-1]) if int(replies[-2] or 0) > 0 else []


def _stats(replies: Sequence[Any], budget_counts: Sequence[Any] = ()) -> Dict[str, int]:
    """`budget_counts`: HMGET of `gwaiting` for _budget_groups (a second round trip, only then)."""
    queued, line, stale, delayed, due, inflight, dead, completed, grouped = (int(v or 0) for v in replies[:9])
    budget = min(max(0, grouped), sum(int(v or 0) for v in budget_counts))
    ready = queued + (max(0, line - stale) if line > 0 else 0) + max(0, grouped) - budget
    out = {
        "ready": ready,
        "delayed": delayed,
        "dueDelayed": due,
        "inflight": inflight,
        "dead": dead,
        "completed": completed,
        "backlog": ready + due + inflight,
    }
    if budget:  # (as QueueCounts: present only when some job waits for budget)
        out["waitingForBudget"] = budget
    return out


def _pipelines(queue: Optional[str], known: Iterable[str]) -> List[str]:
    return [queue.split("/")[0]] if queue else sorted(known)


_CURSOR = re.compile(r"^(\d{1,20}-\d{1,20})(?:/(\d{1,6}))?$")


def _since(since: Optional[str]) -> Optional[Tuple[str, int]]:
    """`since` (an Event's cursor, or a stream id) as (stream id, part)."""
    if since is None:
        return None
    m = _CURSOR.match(since)
    if not m:
        raise ValueError(f"since: expected an event cursor like 1700000000000-0 or 1700000000000-0/3, got {since!r}")
    return m.group(1), int(m.group(2) or 0)


def _events_after(entries: Sequence[Tuple[str, Dict[str, str]]], since: Optional[Tuple[str, int]]) -> List[Event]:
    """The events of XRANGE/XREAD entries after `since` (the rest of its entry, then the later ones)."""
    out: List[Event] = []
    for event_id, fields in entries:
        for event in _events(event_id, fields):
            if since is None or event_id != since[0] or event.part > since[1]:
                out.append(event)
    return out


EVENTS_PAGE = 500


class Client:
    """Enqueue jobs and read queues. Thread-safe as redis-py's client is."""

    def __init__(
        self, redis_client: Any, *, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES, refuse_json_strings: bool = False
    ) -> None:
        """refuse_json_strings: data that is a str holding a JSON object raises InvalidJobError
        (by default it is enqueued as that string, with a JSONStringDataWarning)."""
        self.redis = redis_client
        self.max_payload_bytes = max_payload_bytes
        self.refuse_json_strings = refuse_json_strings
        self._cluster = type(redis_client).__name__ == "RedisCluster"
        self._registered: Set[str] = set()
        self._layouts = _LayoutChecks()
        self._contracts = _Contracts()
        self._scripts: Dict[str, _Script] = {}

    def _drive(self, op: _admin.Op) -> Any:
        """Runs one of _admin's operations: each Redis call it yields, its reply (or error) sent back."""
        reply: Any = None
        error: Optional[BaseException] = None
        while True:
            try:
                step = op.throw(error) if error is not None else op.send(reply)
            except StopIteration as done:
                return done.value
            error = None
            try:
                reply = self._step(step)
            except Exception as err:  # noqa: BLE001 - handed to the operation, which re-raises what it does not expect
                error = err

    def _step(self, step: _admin.Step) -> Any:
        if isinstance(step, _admin.Script):
            script = self._scripts.get(step.name) or self._scripts.setdefault(step.name, _Script(step.name))
            return script(self.redis, step.keys, step.args)
        if isinstance(step, _admin.Pipe):
            pipe = self.redis.pipeline(transaction=step.transaction and not self._cluster)
            for call in step.calls:
                getattr(pipe, call.method)(*call.args, **call.kwargs)
            return pipe.execute(raise_on_error=step.raise_on_error)
        return getattr(self.redis, step.method)(*step.args, **step.kwargs)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        refuse_json_strings: bool = False,
        **redis_kwargs: Any,
    ) -> "Client":
        """A client for `url` (redis://, rediss://, redis-cluster://, redis-sentinel://); the
        other keywords go to redis-py: socket_connect_timeout (5 s: TCP and TLS handshake) and
        socket_timeout (30 s: any one reply) bound every wait, None for no limit."""
        return cls(
            _redis_from_url(url, **redis_kwargs),
            max_payload_bytes=max_payload_bytes,
            refuse_json_strings=refuse_json_strings,
        )

    def close(self) -> None:
        self.redis.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- producing -----------------------------------------------------------------------

    def enqueue(
        self,
        queue: str,
        data: Any,
        *,
        id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        priority: Optional[int] = None,
        delay: Optional[Duration] = None,
        attempts: Optional[int] = None,
        timeout: Optional[Duration] = None,
        content_hash: Optional[str] = None,
        trace: Optional[str] = None,
        group: Optional[str] = None,
        dedupe: Optional[Mapping[str, Any]] = None,
        uses: Optional[Mapping[str, Mapping[str, int]]] = None,
        task: Optional[str] = None,
        notify: Optional[Mapping[str, Any]] = None,
    ) -> str:
        """Enqueue one job; returns its id (the existing job's id when the id, idempotency
        key or throttle key was seen before, or a debounce replaced the waiting job's data). `delay`/`timeout` are seconds or a timedelta; timeout 0 or None
        means the pool's default job timeout. `trace`: a W3C `traceparent` to link the job's
        spans to (docs/protocol.md, "Trace context"). `group`: the job's group (tenant, key; at
        most 128 UTF-8 bytes), served round-robin with the queue's other groups and held to
        the group's limits (docs/protocol.md, "Groups"). `dedupe`: {"key", "mode", "window"} —
        "debounce": while the job enqueued with the key waits, it takes this data and waits
        `window` seconds again (one run per burst, latest data); "throttle": the first job of a
        window runs, the rest return its id (docs/protocol.md, "Debounce and throttle"). `uses`:
        what the job uses of the pipeline's resources, e.g. {"openai": {"tokens": 1200}} (an
        estimate; 1 request implied): it starts only when a key has room (docs/budgets.md).
        `task`: the job's task — which of the stage's handlers runs it, and which schemas of the
        queue's contract its data and result are checked against. `notify`: {"url", "events"} —
        POST a signed notification there when the job ends in one of events (completed, dead,
        cancelled), sent by the pool's workers with the pool's secret (docs/notifications.md)."""
        job = _one_job(data, id=id, idempotency_key=idempotency_key, priority=priority, delay=delay,
                       attempts=attempts, timeout=timeout, content_hash=content_hash, trace=trace, group=group,
                       dedupe=dedupe, uses=uses, task=task, notify=notify)
        return self.enqueue_many(queue, [job])[0].id

    def enqueue_flow(
        self, pipeline: str, jobs: Sequence[Mapping[str, Any]], *, idempotency_key: Optional[str] = None
    ) -> "FlowResult":
        """Enqueue a flow (docs/flows.md): jobs across the stages of one pipeline, each a mapping
        {"key", "queue", "data", "parents": [keys], "on_parent_failure": "fail"|"continue"|"ignore"}
        and the options priority, attempts, timeout, group, task, delay, uses, notify — all
        written or none, by the same script as the TypeScript producer's enqueueFlow, after the
        same checks (the graph, keys, queues, each job's data against its stage's contract).
        `idempotency_key`: the same key within 24 hours returns the first submission's ids
        (FlowResult.created False) and writes nothing."""
        return self._drive(_flow_op(self, pipeline, jobs, idempotency_key))  # type: ignore[no-any-return]

    def enqueue_many(self, queue: str, jobs: Iterable[Mapping[str, Any]]) -> List[Enqueued]:
        """Enqueue many jobs (each a mapping with `data` and enqueue()'s keyword options),
        atomically per chunk of 500; every job is checked before any reaches Redis. When the
        queue has a contract, every job's data is checked against it (ContractViolation names
        each bad job; nothing is enqueued); it is read once and kept by its hash, which the
        enqueue script checks is still the one in force."""
        return self._drive(_enqueue_many_op(self, queue, jobs))  # type: ignore[no-any-return]

    def cancel(
        self, job_id: str, queue: Optional[str] = None, *, retention_seconds: int = CANCELLED_RETENTION_SECONDS
    ) -> Cancelled:
        """Cancel a job wherever it is: waiting or delayed, it leaves its set; running, its
        worker aborts the handler at its next heartbeat and refuses its late result; a fan-out
        parent takes its unfinished children with it. Never retried or dead-lettered. A finished
        job is left alone (outcome "finished"); an unknown one gives "notFound"."""
        return self._drive(_cancel_op(job_id, queue, retention_seconds))  # type: ignore[no-any-return]

    # -- reading -------------------------------------------------------------------------

    def get_job(self, job_id: str, queue: Optional[str] = None) -> Optional[Job]:
        """The job's record, or None (never enqueued, or expired). `queue` (or its pipeline)
        narrows the lookup; without it every pipeline in cvy:pipelines is searched."""
        return self._drive(_get_job_op(job_id, queue))  # type: ignore[no-any-return]

    def job_logs(self, job_id: str, queue: Optional[str] = None) -> List[LogLine]:
        """The lines the job's handlers logged (ctx.log), oldest first; empty when none."""
        return self._drive(_job_logs_op(job_id, queue))  # type: ignore[no-any-return]

    def stats(self, queue: str) -> Dict[str, int]:
        """Counts as `conveyor stats --json`: ready, delayed, dueDelayed, inflight, dead,
        completed, backlog (ready + due delayed + in flight) and waitingForBudget (not in ready),
        in one round trip (two while jobs wait for a resource's budget)."""
        return self._drive(_stats_op(queue))  # type: ignore[no-any-return]

    def counters(self, queue: str) -> Dict[str, int]:
        """The queue's lifetime counters (enqueued, started, completed, failed, retried, dead…)."""
        return self._drive(_counters_op(queue))  # type: ignore[no-any-return]

    # -- queue control (as conveyor pause/resume, limit, dlq, schedule, group, resource) -----------

    def pause(self, queue: str) -> None:
        """No worker claims from the queue until resume() (running jobs finish; enqueues are accepted)."""
        self._drive(_admin.pause(queue))

    def resume(self, queue: str) -> None:
        """Claiming from the queue starts again (a pool held at zero is woken)."""
        self._drive(_admin.resume(queue))

    def control(self, queue: str) -> QueueControl:
        """Whether the queue is paused, and its rate limit."""
        return self._drive(_admin.control(queue))  # type: ignore[no-any-return]

    def set_rate_limit(self, queue: str, rate: Union[str, RateLimit, None]) -> Optional[RateLimit]:
        """At most N job starts per second, minute or hour across every worker ("20/s", "100/m",
        "5/h", or a RateLimit(max, per_ms)); None (or "off") removes the limit."""
        return self._drive(_admin.set_rate_limit(queue, rate))  # type: ignore[no-any-return]

    def rate_limit(self, queue: str) -> Optional[RateLimit]:
        """The queue's rate limit (str() of it reads as the CLI writes it: "20/s"), or None."""
        return self.control(queue).rate_limit

    def remove_rate_limit(self, queue: str) -> None:
        self.set_rate_limit(queue, None)

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> List[DeadLetter]:
        """The queue's dead letters, oldest first: `limit` of them from `offset` (the count is stats()["dead"])."""
        return self._drive(_admin.dead_letters(queue, limit, offset))  # type: ignore[no-any-return]

    def retry_dead(self, queue: str, ids: Optional[Iterable[str]] = None) -> int:
        """Move dead letters back to ready with fresh attempts: these ids, or all of them when
        ids is None. Returns how many moved (an id that is not a dead letter of the queue is skipped)."""
        return self._drive(_admin.retry_dead(queue, ids))  # type: ignore[no-any-return]

    def purge_dead(self, queue: str) -> int:
        """Delete every dead letter of the queue (records and logs); returns how many."""
        return self._drive(_admin.purge_dead(queue))  # type: ignore[no-any-return]

    def add_schedule(
        self,
        queue: str,
        name: str,
        *,
        every: Optional[Duration] = None,
        cron: Optional[str] = None,
        tz: Optional[str] = None,
        data: Any = None,
        attempts: Optional[int] = None,
    ) -> Schedule:
        """Add (or replace) a repeating job: `every` seconds (≥ 1, or a timedelta) or on a `cron`
        expression in `tz` (IANA, default UTC); its first tick waits in the queue as a delayed job."""
        return self._drive(_admin.add_schedule(queue, name, every, cron, tz, data, attempts))  # type: ignore[no-any-return]

    def schedules(self, queue: str) -> List[Schedule]:
        """The queue's schedules by name, each with its next run."""
        return self._drive(_admin.schedules(queue))  # type: ignore[no-any-return]

    def remove_schedule(self, queue: str, name: str) -> bool:
        """Remove a schedule and its pending tick; False when there was none."""
        return self._drive(_admin.remove_schedule(queue, name))  # type: ignore[no-any-return]

    def set_group(
        self,
        queue: str,
        group: Optional[str] = None,
        *,
        concurrency: Optional[int] = UNSET,
        rate: Union[str, RateLimit, None] = UNSET,
        weight: Optional[int] = UNSET,
        on_dead: Optional[str] = UNSET,
    ) -> None:
        """Set one group's settings, or with group None the default of every group (conveyor group
        limit|set): `concurrency` jobs at once, `rate` ("10/s"), `weight` (turns per round, one
        group only), `on_dead` "block"|"continue". None removes a setting; one left out is unchanged."""
        self._drive(_admin.set_group(queue, group, concurrency, rate, weight, on_dead))

    def limit_group(
        self,
        queue: str,
        group: Optional[str] = None,
        *,
        concurrency: Optional[int] = UNSET,
        rate: Union[str, RateLimit, None] = UNSET,
    ) -> None:
        """set_group with the limits only (conveyor group limit)."""
        self.set_group(queue, group, concurrency=concurrency, rate=rate)

    def pause_group(self, queue: str, group: str) -> None:
        """No job of the group starts until resume_group (running ones finish)."""
        self._drive(_admin.pause_group(queue, group, True))

    def resume_group(self, queue: str, group: str) -> None:
        """The group's jobs start again (a block by a dead job ends too)."""
        self._drive(_admin.pause_group(queue, group, False))

    def groups(self, queue: str) -> QueueGroups:
        """The queue's group defaults and each group with waiting or running jobs or a setting."""
        return self._drive(_admin.groups(queue))  # type: ignore[no-any-return]

    def set_resource(
        self,
        pipeline: str,
        name: str,
        keys: Mapping[str, Union[str, Sequence[ResourceLimit]]],
        *,
        ceiling: float = _admin.DEFAULT_CEILING,
    ) -> None:
        """Create or replace a resource of a pipeline (or of a queue's pipeline): its keys, each
        with its limits ("requests=60/m,tokens=200000/m" or ResourceLimit(unit, max, window_ms)),
        and the share of each limit jobs are admitted up to (docs/budgets.md)."""
        self._drive(_admin.set_resource(pipeline, name, keys, ceiling))

    def resources(self, pipeline: Optional[str] = None) -> List[ResourceState]:
        """The resources of a pipeline (or a queue's), or of every known pipeline: each key's use
        of each limit in its window, benches, and jobs waiting for budget."""
        return self._drive(_admin.resources(pipeline))  # type: ignore[no-any-return]

    def remove_resource(self, pipeline: str, name: str) -> bool:
        """Delete a resource (its windows and benches too); False when there was none."""
        return self._drive(_admin.remove_resource(pipeline, name))  # type: ignore[no-any-return]

    def bench_resource_key(self, pipeline: str, name: str, key: str, until: Union[float, datetime]) -> None:
        """Sideline a resource's key until `until` (a datetime or seconds since the epoch) for
        every worker, as a provider's 429 asks."""
        self._drive(_admin.bench_resource_key(pipeline, name, key, until))

    def wait(self, ids: Iterable[str], timeout: Optional[float] = None, queue: Optional[str] = None) -> Dict[str, Job]:
        """Waits until each job has ended (completed at its last stage, dead, cancelled, deleted)
        or `timeout` seconds pass; returns {id: Job}: an ended job as it ended, an open one as it
        is now (its state tells), an id without a record left out. One reader of the pipelines'
        event streams for all the ids (no poll per job); a job ended before the call is answered
        from its record. `queue` (or its pipeline) narrows the lookup. On a Redis Cluster, the ids
        of one pipeline per call (its streams share one slot)."""
        return self._drive(_wait_op(ids, timeout, queue))  # type: ignore[no-any-return]

    def flow(self, flow_id: str, pipeline: Optional[str] = None) -> Optional["Flow"]:
        """A flow's jobs and their states (docs/flows.md, "Viewing a flow"), as `conveyor flow <id>`
        reads them: Flow(id, pipeline, created_at, counts by state, jobs sorted by key, each
        FlowJob(key, id, queue, state, parents, policy, pending, reason)); None for a flow Redis
        does not have (never enqueued, or let go 7 days after its last job ended). `pipeline` (or
        one of its queues) narrows the lookup."""
        return self._drive(_flow_view_op(flow_id, pipeline))  # type: ignore[no-any-return]

    def wait_flow(
        self, flow_id: str, timeout: Optional[float] = None, pipeline: Optional[str] = None
    ) -> Optional["Flow"]:
        """Waits as wait() does for every job of the flow, then returns flow(): each job ended, or
        as it is at the timeout (its state tells). None for an unknown flow. A fan-out job
        (`joined`) ends when its join does, which wait() does not follow: it stays open."""
        return self._drive(_wait_flow_op(flow_id, timeout, pipeline))  # type: ignore[no-any-return]

    def events(
        self, queue: str, follow: bool = True, *, since: Optional[str] = None, block: float = 1.0
    ) -> Iterator[Event]:
        """The queue's transitions in order. follow=True: events after `since` (default: those
        after this call) until the caller stops iterating; follow=False: the stored history after
        `since` (default: all ~10,000 kept), then stop. `since` is an Event's `cursor` (resumes
        inside a batch entry) or a stream id."""
        key = QueueKeys(queue).events
        after = _since(since)
        if not follow:
            return self._history(key, after)
        if after is None:  # anchored now, not at the first next(): nothing in between is missed
            newest = self.redis.xrevrange(key, "+", "-", count=1)
            return self._follow(key, newest[0][0] if newest else "0-0", block, [])
        # The rest of the cursor's own entry first (a batch entry holds several jobs' events).
        rest = _events_after(self.redis.xrange(key, after[0], after[0]), after)
        return self._follow(key, after[0], block, rest)

    def _history(self, key: str, after: Optional[Tuple[str, int]]) -> Iterator[Event]:
        start = "-" if after is None else after[0]
        while True:
            entries = self.redis.xrange(key, start, "+", count=EVENTS_PAGE)
            yield from _events_after(entries, after)
            if len(entries) < EVENTS_PAGE:
                return
            start = f"({entries[-1][0]}"

    def _follow(self, key: str, last: str, block: float, first: List[Event]) -> Iterator[Event]:
        yield from first
        while True:
            reply = self.redis.xread({key: last}, count=EVENTS_PAGE, block=_block_ms(self.redis, block))
            for _, entries in reply or []:
                for event_id, fields in entries:
                    last = event_id
                    yield from _events(event_id, fields)


class InvalidFlowError(ValueError):
    """A flow refused before anything was written (docs/flows.md): the graph, a key, a queue."""


class FlowResult(NamedTuple):
    """What enqueue_flow returns: the flow's id and each job's id by key (TypeScript: {flowId, ids})."""

    flow_id: str
    ids: Dict[str, str]
    #: False: the idempotency key named a flow written before; these are its ids, nothing was written.
    created: bool = True


@dataclass
class FlowJob:
    """One job of a flow as Client.flow reads it (TypeScript: FlowJobState)."""

    key: str
    id: str
    queue: str
    #: waiting-children, ready, delayed, active, completed, dead, cancelled…; "gone" once its record was reclaimed.
    state: str
    #: The parents' keys.
    parents: List[str]
    #: What it does when a parent dies or is cancelled: "fail" (the default), "continue" or "ignore".
    policy: str
    #: For a job waiting for its parents: how many have not ended yet.
    pending: Optional[int] = None
    #: Why it was cancelled, when a parent's end cancelled it.
    reason: Optional[str] = None


@dataclass
class Flow:
    """A flow's jobs and their states (docs/flows.md, "Viewing a flow"; TypeScript: FlowView)."""

    id: str
    pipeline: str
    #: ms since the epoch.
    created_at: int
    #: Jobs by state.
    counts: Dict[str, int]
    #: Sorted by key, as the TypeScript view sorts them (localeCompare).
    jobs: List[FlowJob]


#: Jobs per pipelined read of a flow's records (a flow is up to 10,000 jobs), as queue/flows.ts.
FLOW_READ_RUN = 500
#: Where each character a flow key may hold sorts in ICU's collation (JavaScript's localeCompare):
#: the punctuation, then digits, then letters regardless of case.
_COLLATION = {c: i for i, c in enumerate("_-:." + "0123456789" + "abcdefghijklmnopqrstuvwxyz")}


def _key_order(key: str) -> Tuple[List[int], List[int]]:
    """The sort key of a flow key as localeCompare orders it: by letter, then lowercase first."""
    return [_COLLATION.get(c.lower(), 100 + ord(c)) for c in key], [int(c.isupper()) for c in key]


def _flow_target(flow_id: Any, pipeline: Any) -> None:
    """Client.flow's arguments, each refused by name (InvalidArgumentError)."""
    try:
        check_job_id(flow_id)
    except ValueError as err:
        raise InvalidArgumentError(f"flow_id: {err}") from None
    if pipeline is not None:
        try:
            check_queue(pipeline)
        except ValueError as err:
            raise InvalidArgumentError(
                f"pipeline: invalid pipeline {pipeline!r}: a pipeline or one of its queues ('pipeline/stage'), "
                "of letters, digits, '.', '_', '-'"
            ) from None


def _flow_view_op(flow_id: str, pipeline: Optional[str]) -> _admin.Op:
    """Client.flow for both clients: what queue/flows.ts's flowView reads, in the same order."""
    _flow_target(flow_id, pipeline)
    for p in (yield from _known_op(pipeline)):
        keys = PipelineKeys(p)
        stored = yield _admin.Call("hgetall", (keys.flow(flow_id),))
        if not stored:
            continue
        members = [(f[2:], job_id) for f, job_id in stored.items() if f.startswith("k:")]
        jobs: List[FlowJob] = []
        for i in range(0, len(members), FLOW_READ_RUN):
            run = members[i : i + FLOW_READ_RUN]
            calls = [
                _admin.Call("hmget", (keys.job(job_id), "state", "queue", "parents", "pending", "cancelReason",
                                      "onParentFailure"))
                for _, job_id in run
            ]
            replies = yield _admin.Pipe(calls, transaction=False, raise_on_error=False)
            for (key, job_id), reply in zip(run, replies):
                state, queue, parents, pending, reason, policy = (
                    [None] * 6 if isinstance(reply, Exception) else reply
                )
                job = FlowJob(key, job_id, queue or "", state or "gone", parents.split(" ") if parents else [],
                              policy if policy in ("continue", "ignore") else "fail")
                if state == "waiting-children" and pending is not None:
                    job.pending = _int(pending)
                if reason:
                    job.reason = reason
                jobs.append(job)
        jobs.sort(key=lambda j: _key_order(j.key))
        counts: Dict[str, int] = {}
        for j in jobs:
            counts[j.state] = counts.get(j.state, 0) + 1
        return Flow(flow_id, p, _int(stored.get("createdAt")) or 0, counts, jobs)
    return None


def _wait_flow_op(flow_id: str, timeout: Optional[float], pipeline: Optional[str]) -> _admin.Op:
    """Client.wait_flow for both clients: the flow's jobs waited for as Client.wait does, then read again."""
    flow = yield from _flow_view_op(flow_id, pipeline)
    if flow is None:
        return None
    yield from _wait_op([j.id for j in flow.jobs if j.state != "gone"], timeout, flow.pipeline)
    return (yield from _flow_view_op(flow_id, flow.pipeline))


def _enqueue_many_op(client: Any, queue: str, jobs: Iterable[Mapping[str, Any]]) -> _admin.Op:
    """enqueue_many for Client and AsyncClient (`client`: its payload settings, contracts, queues registered)."""
    batch = _enqueue_batch(queue, jobs, client.max_payload_bytes, client.refuse_json_strings)
    cached = client._contracts.known(queue)
    if cached is not None:
        try:
            _refuse(batch, cached)
        except ContractViolation as refused:
            # A refusal is checked against the contract in force: the cached one may be out of date.
            now = yield from _read_contract_op(client, queue)
            if now is not None and now.hash == cached.hash:
                raise refused
            _refuse(batch, now)
    yield from _check_layout_op(client, batch.keys.pipeline)
    if batch.keys.queue not in client._registered:  # cvy:pipelines, cvy:queues: docs/protocol.md, once per process
        yield _admin.Call("sadd", (PIPELINES_KEY, batch.keys.pipeline))
        yield _admin.Call("sadd", (QUEUES_KEY, batch.keys.queue))
        client._registered.add(batch.keys.queue)
    out: List[Enqueued] = []
    changed = False
    for start in range(0, len(batch.records), BULK_CHUNK):
        while True:
            contract = client._contracts.known(queue)
            try:
                reply = yield batch.script(start, contract.hash if contract else "")
                break
            except ResponseError as err:
                in_force = contract_changed(err)
                if in_force is None:
                    raise _payload_error(err) from None
                if changed:
                    raise ContractChangedError(_changed_again(queue, in_force)) from None
                # The contract changed since it was read: read it, check the jobs not yet sent again, retry once.
                changed = True
                _refuse(batch, (yield from _read_contract_op(client, queue)), start)
        out.extend(_enqueued(reply))
    return out


def _check_layout_op(client: Any, pipeline: str) -> _admin.Op:
    """Refuses (LayoutRefusedError) a pipeline whose layout in force this client cannot write; read every 30 s."""
    if client._layouts.due(pipeline):
        client._layouts.read(pipeline, (yield _admin.Call("hgetall", (PipelineKeys(pipeline).layout,))))


def _read_contract_op(client: Any, queue: str) -> _admin.Op:
    reply = yield _admin.Call("hmget", (QueueKeys(queue).contract, "hash", "body"))
    return client._contracts.store(queue, _stored_contract(reply))


def _flow_op(client: Any, pipeline: str, jobs: Sequence[Mapping[str, Any]],
             idempotency_key: Optional[str] = None) -> _admin.Op:
    """enqueue_flow for Client and AsyncClient (`client`: its payload settings, contracts, queues registered)."""
    if not isinstance(pipeline, str) or "/" in pipeline:
        raise InvalidFlowError(f"a flow is enqueued into a pipeline, got the queue name {pipeline!r}")
    check_queue(pipeline)
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= FLOW_IDEMPOTENCY_KEY_MAX
    ):
        raise InvalidFlowError(
            f"idempotency_key must be a string of 1..{FLOW_IDEMPOTENCY_KEY_MAX} characters, got {idempotency_key!r}"
        )
    order = _flow_order(pipeline, jobs)
    flow_id = new_job_id()
    ids = {job["key"]: new_job_id() for job in order}
    records: Dict[str, Dict[str, Any]] = {}
    for job in order:
        key, job_id = job["key"], ids[job["key"]]
        opts = {k: job[k] for k in ("priority", "attempts", "timeout", "group", "task", "trace", "delay", "uses", "notify")
                if k in job}
        try:
            records[key] = _encode_job({"id": job_id, "data": job.get("data"), **opts}, 0,
                                       client.max_payload_bytes, client.refuse_json_strings)
        except InvalidJobError as err:
            raise type(err)(f"flow job {key}: {str(err).replace(f'job {job_id}: ', '')}") from None
    queues = list(dict.fromkeys(job["queue"] for job in order))

    def check(refresh: bool) -> _admin.Op:
        for q in queues:
            contract = client._contracts.known(q)
            if refresh or q not in client._contracts.by_queue:
                contract = yield from _read_contract_op(client, q)
            mine = [j for j in order if j["queue"] == q]
            bad = job_violations(contract, [{**j, "id": j["key"]} for j in mine], [records[j["key"]] for j in mine], 0)
            if bad:
                raise ContractViolation(q, contract.hash if contract else "", bad)

    yield from check(False)
    pk = PipelineKeys(pipeline)
    yield from _check_layout_op(client, pipeline)
    for q in queues:
        if q not in client._registered:
            yield _admin.Call("sadd", (PIPELINES_KEY, pipeline))
            yield _admin.Call("sadd", (QUEUES_KEY, q))
            client._registered.add(q)
    fields = ["id", "key", "queue", "data"]
    values = []
    for job in order:
        r = records[job["key"]]
        parents = job.get("parents") or []
        values.append({"id": r["id"], "key": job["key"], "queue": job["queue"], "data": r["data"],
                       "priority": r.get("priority"), "attempts": r.get("attempts"), "timeoutMs": r.get("timeoutMs"),
                       "trace": r.get("trace"), "group": r.get("group"), "task": r.get("task"),
                       "delayMs": r.get("delayMs"), "uses": r.get("uses"), "notify": r.get("notify"),
                       "parents": " ".join(parents) if parents else None, "onParentFailure": job.get("on_parent_failure")})
    for f in ("priority", "attempts", "timeoutMs", "trace", "group", "task", "delayMs", "uses", "notify", "parents",
              "onParentFailure"):
        if any(v[f] is not None for v in values):
            fields.append(f)
    rows = [["" if v[f] is None else v[f] for f in fields] for v in values]
    for attempt in range(2):
        hashes: List[str] = []
        for q in queues:
            c = client._contracts.known(q)
            hashes.append(c.hash if c else "")
        try:
            reply = yield _gateway.enqueue_flow(pk, flow_id, max_payload_bytes=client.max_payload_bytes, queues=queues,
                                                contract_hashes=hashes, fields=fields, rows=rows,
                                                idempotency_key=idempotency_key)
            before = _gateway.flow_reply(reply)
            if before is not None:  # the key named a flow written before: its ids, in the order sent
                first_id, first_ids = before
                return FlowResult(first_id, {job["key"]: first_ids[i] for i, job in enumerate(order)}, False)
            return FlowResult(flow_id, ids)
        except ResponseError as err:
            text = str(err)
            if "ERR_INVALID_FLOW" in text:
                raise InvalidFlowError(text.split("ERR_INVALID_FLOW ", 1)[-1]) from None
            if contract_changed(err) is None or attempt > 0:
                raise _payload_error(err) from None
            yield from check(True)
    raise AssertionError("unreachable")


def _known_op(queue: Optional[str]) -> _admin.Op:
    """The pipelines a lookup searches: the queue's, or every known one."""
    return _pipelines(queue, () if queue else (yield _admin.Call("smembers", (PIPELINES_KEY,))))


def _cancel_op(job_id: str, queue: Optional[str], retention_seconds: int) -> _admin.Op:
    check_job_id(job_id)
    for pipeline in (yield from _known_op(queue)):
        reply = yield _gateway.cancel_job(PipelineKeys(pipeline), job_id, retention_seconds=retention_seconds)
        if _gateway.cancel_reply(reply).outcome != "notFound":
            return _cancelled(job_id, reply)
    return Cancelled(job_id, "notFound", "", "", 0)


def _get_job_op(job_id: str, queue: Optional[str]) -> _admin.Op:
    check_job_id(job_id)
    for pipeline in (yield from _known_op(queue)):
        raw = yield _admin.Call("hgetall", (PipelineKeys(pipeline).job(job_id),))
        if raw:
            if "data" not in raw and "queue" in raw:
                # a waiting job's data longer than 64 B is in its own key until it is claimed
                parked = yield _admin.Call("get", (PipelineKeys(pipeline).data(job_id),))
                if parked is not None:
                    raw["data"] = parked
            return _job(job_id, raw)
    return None


def _job_logs_op(job_id: str, queue: Optional[str]) -> _admin.Op:
    check_job_id(job_id)
    for pipeline in (yield from _known_op(queue)):
        lines = yield _admin.Call("lrange", (PipelineKeys(pipeline).logs(job_id), 0, -1))
        if lines:
            return _log_lines(lines)
    return []


def _stats_op(queue: str) -> _admin.Op:
    """`budget_counts` for _stats: a second round trip, only while jobs wait for a resource's budget."""
    replies = yield _admin.Pipe(_stats_calls(queue))
    waits = _budget_groups(replies)
    return _stats(replies, (yield _admin.Call("hmget", (QueueKeys(queue).group_waiting, waits))) if waits else ())


def _counters_op(queue: str) -> _admin.Op:
    counts = yield _admin.Call("hgetall", (QueueKeys(queue).counts,))
    return {name: int(v) for name, v in counts.items()}


def _newest_op(key: str) -> _admin.Op:
    newest = yield _admin.Call("xrevrange", (key, "+", "-"), {"count": 1})
    return newest[0][0] if newest else "0-0"


#: Records per job_states call (as queue/waiter.ts): a call holds Redis while it runs.
_STATES_BATCH = 1000


def _job_states_op(pipeline: str, ids: Sequence[str]) -> _admin.Op:
    """job_states' reply for each id's record in `pipeline` (its state; an ended job's whole record
    after it), one call per 1,000 ids."""
    pk = PipelineKeys(pipeline)
    replies: List[Any] = []
    for i in range(0, len(ids), _STATES_BATCH):
        chunk = ids[i : i + _STATES_BATCH]
        replies.extend((yield _gateway.job_states(pk, chunk, whole=True, fields=["state"])))
    return [_gateway.job_state_reply(r) for r in replies]


def _ended_job(job_id: str, reply: Dict[str, Any]) -> Optional[Job]:
    """The job of a job_states reply when it has ended (None: open, or no record)."""
    if "type" in reply or reply.get("state") not in WAIT_ENDED or "record" not in reply:
        return None
    return _job(job_id, reply["record"])


def _wait_start_op(ids: List[str], pipelines: Sequence[str]) -> _admin.Op:
    """The records of a wait's jobs, each looked for in each pipeline until found (not a read per
    id). Returns ({id: Job} of the ended ones, the ids of the open ones); an id without a record
    (or whose key is not a hash) is in neither."""
    ended: Dict[str, Job] = {}
    pending: Set[str] = set()
    left = ids
    for pipeline in pipelines:
        if not left:
            break
        rest: List[str] = []
        for job_id, reply in zip(left, (yield from _job_states_op(pipeline, left))):
            job = _ended_job(job_id, reply)
            if job is not None:
                ended[job_id] = job
            elif reply.get("type") == "none":
                rest.append(job_id)
            elif "type" not in reply:
                pending.add(job_id)
        left = rest
    return ended, pending


def _ended_records_op(events: Dict[str, Dict[str, Job]]) -> _admin.Op:
    """The records of the jobs events ended ({pipeline: {id: job as its event tells}}), read
    together; a job whose record is gone or no longer ended (retried since) as its event tells."""
    out: Dict[str, Job] = {}
    for pipeline, bare in events.items():
        ids = list(bare)
        for job_id, reply in zip(ids, (yield from _job_states_op(pipeline, ids))):
            out[job_id] = _ended_job(job_id, reply) or bare[job_id]
    return out


def _wait_op(ids: Iterable[str], timeout: Optional[float], queue: Optional[str]) -> _admin.Op:
    """Client.wait for both clients."""
    wanted = list(dict.fromkeys(ids))
    for job_id in wanted:
        check_job_id(job_id)
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    pipelines = yield from _known_op(queue)
    # stream positions first, then the records: an end after them is read from the streams
    positions: Dict[str, str] = {}
    streams: Dict[str, str] = {}  # each followed stream's pipeline
    for key, pipeline in _wait_streams((yield _admin.Call("smembers", (QUEUES_KEY,))), pipelines):
        positions[key] = yield from _newest_op(key)
        streams[key] = pipeline
    out, pending = yield from _wait_start_op(wanted, pipelines)
    while pending and positions:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            break
        block = min(1.0, left) if left is not None else 1.0
        reply = yield _admin.Call("xread", (dict(positions),), {"count": EVENTS_PAGE, "block": max(1, int(block * 1000))})
        by_event: Dict[str, Dict[str, Job]] = {}  # ended by an event, by pipeline: read after the reply
        for key, entries in reply or []:
            for event_id, fields in entries:
                positions[key] = event_id
                for e in _events(event_id, fields):
                    if e.id not in pending:
                        continue
                    ended = _ended_by(e)
                    nxt = e.fields.get("next") if e.type == "completed" else None
                    if nxt and QueueKeys(nxt).events not in positions:
                        # on to a stage not followed yet: follow it, then read the record
                        positions[QueueKeys(nxt).events] = yield from _newest_op(QueueKeys(nxt).events)
                        streams[QueueKeys(nxt).events] = streams[key]
                        job = yield from _get_job_op(e.id, queue)
                        ended = job if job is not None and job.state in WAIT_ENDED else None
                        if ended is not None:
                            pending.discard(e.id)
                            out[e.id] = ended
                        continue
                    if ended is not None:
                        pending.discard(e.id)
                        by_event.setdefault(streams[key], {})[e.id] = ended
        if by_event:
            out.update((yield from _ended_records_op(by_event)))
    for job_id in pending:
        job = yield from _get_job_op(job_id, queue)
        if job is not None:
            out[job_id] = job
    return out


FLOW_MAX_JOBS = 10_000
FLOW_MAX_PARENTS = 10_000
_FLOW_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$")
_FLOW_POLICIES = ("fail", "continue", "ignore")
#: A flow job's fields; the job options a flow takes are the ones the TypeScript producer takes.
_FLOW_FIELDS = {"key", "queue", "data", "parents", "on_parent_failure", "priority", "attempts", "timeout", "group", "task",
                "trace", "delay", "uses", "notify"}
#: Why the other job options are refused in a flow (as the TypeScript producer says it).
_FLOW_REFUSED = {
    "dedupe": "dedupe is not supported in a flow: a debounced or throttled job would stand in for another flow's job, "
              "whose dependents wait in that flow",
    "idempotency_key": "idempotency_key is not supported on a flow job: give the flow one "
                       "(enqueue_flow(pipeline, jobs, idempotency_key=…))",
    "id": "id is not supported in a flow: a flow's job ids are generated (the reply gives each by key)",
    "content_hash": "content_hash is not supported in a flow: a flow job's result is its dependents' input",
}
#: A flow's idempotency key: 1..200 characters.
FLOW_IDEMPOTENCY_KEY_MAX = 200


def _flow_order(pipeline: str, jobs: Sequence[Mapping[str, Any]]) -> List[Mapping[str, Any]]:
    """The jobs with each one's parents before it, after checking the graph and each job's shape
    (as the TypeScript producer's flowOrder); InvalidFlowError naming the first problem."""
    if isinstance(jobs, (Mapping, str, bytes)) or not jobs:
        raise InvalidFlowError("a flow needs at least one job (a list of mappings)")
    jobs = list(jobs)
    if len(jobs) > FLOW_MAX_JOBS:
        raise InvalidFlowError(f"a flow has at most {FLOW_MAX_JOBS} jobs, got {len(jobs)}")
    by_key: Dict[str, Mapping[str, Any]] = {}
    for i, job in enumerate(jobs):
        if not isinstance(job, Mapping):
            raise InvalidFlowError(f"flow job at index {i} is not a mapping")
        key = job.get("key")
        if not isinstance(key, str) or not _FLOW_KEY.match(key):
            raise InvalidFlowError(
                f"flow job at index {i}: key must be 1..100 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit, got {key!r}"
            )
        which = f"flow job {key}"
        if key in by_key:
            raise InvalidFlowError(f"{which}: duplicate key")
        by_key[key] = job
        for f in job:
            if f not in _FLOW_FIELDS:
                raise InvalidFlowError(
                    f"{which}: " + _FLOW_REFUSED.get(f, f"{f} is not supported in a flow ({', '.join(sorted(_FLOW_FIELDS))})")
                )
        queue = job.get("queue")
        try:
            check_queue(queue)  # type: ignore[arg-type]
        except ValueError as err:
            raise InvalidFlowError(f"{which}: {err}") from None
        if str(queue).split("/")[0] != pipeline:
            raise InvalidFlowError(
                f"{which}: queue {queue} is not of pipeline {pipeline} (a flow lives in one pipeline: its stages share one Redis slot)"
            )
        policy = job.get("on_parent_failure")
        if policy is not None and policy not in _FLOW_POLICIES:
            raise InvalidFlowError(f"{which}: on_parent_failure must be fail, continue or ignore, got {policy!r}")
        parents = job.get("parents") or []
        if isinstance(parents, (str, bytes, Mapping)) or not isinstance(parents, Sequence):
            raise InvalidFlowError(f"{which}: parents must be a list of keys")
        if len(parents) > FLOW_MAX_PARENTS:
            raise InvalidFlowError(f"{which}: at most {FLOW_MAX_PARENTS} parents, got {len(parents)}")
        if len(set(parents)) != len(parents):
            raise InvalidFlowError(f"{which}: a parent is listed twice")
    waiting: Dict[str, int] = {}
    children: Dict[str, List[str]] = {}
    for job in jobs:
        for p in job.get("parents") or []:
            if p not in by_key:
                raise InvalidFlowError(f"flow job {job['key']}: parent {p!r} is not a key of this flow")
            if p == job["key"]:
                raise InvalidFlowError(f"flow job {job['key']}: a job cannot be its own parent")
            children.setdefault(p, []).append(job["key"])
        waiting[job["key"]] = len(job.get("parents") or [])
    order: List[Mapping[str, Any]] = []
    ready = [j["key"] for j in jobs if waiting[j["key"]] == 0]
    while ready:
        key = ready.pop()
        order.append(by_key[key])
        for c in children.get(key, []):
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    if len(order) < len(jobs):
        stuck = [j["key"] for j in jobs if waiting[j["key"]] > 0]
        raise InvalidFlowError(
            f"the flow has a cycle: {', '.join(stuck[:10])}{', …' if len(stuck) > 10 else ''} wait for each other"
        )
    return order


#: The states a wait ends on (docs/flows.md, "Waiting for results").
WAIT_ENDED = ("completed", "dead", "cancelled")


def _ended_by(e: Event) -> Optional[Job]:
    """The job an event ends, as far as the event tells (None: the event ends nothing; a stage
    advance is not an end)."""
    f = e.fields
    if e.type == "completed" and f.get("next"):
        return None
    if e.type not in ("completed", "dead", "cancelled", "deleted"):
        return None
    bare = Job(e.id, e.queue, e.type, None, 0, 0, 0, 0, 0, 0, raw=dict(f))
    if e.type == "completed":
        bare.result = _decode(f.get("result"))
    if e.type == "dead":
        bare.error, bare.dead_reason = _decode(f.get("error")), f.get("reason")
    return bare


def _wait_streams(queues: Iterable[str], pipelines: Sequence[str]) -> List[Tuple[str, str]]:
    """The event streams of the pipelines' queues, each with its pipeline."""
    return [(QueueKeys(q).events, q.split("/")[0]) for q in sorted(queues) if q.split("/")[0] in pipelines]


#: What joins a batch entry's per-job values (docs/protocol.md, Events).
EVENT_LIST_SEPARATOR = "\x1f"


def _events(event_id: str, fields: Dict[str, str]) -> List[Event]:
    """The events of one stream entry: one for a per-job entry, n for a batch entry (the jobs one
    script call started or completed: per-job lists in fields named `x[]`, shared fields)."""
    lists = {k[:-2]: v.split(EVENT_LIST_SEPARATOR) for k, v in fields.items() if k.endswith("[]")}
    if not lists:
        return [_event(event_id, dict(fields), 0)]
    shared = {k: v for k, v in fields.items() if not k.endswith("[]") and k != "n"}
    n = min(len(v) for v in lists.values())
    return [_event(event_id, {**shared, **{k: v[i] for k, v in lists.items()}}, i) for i in range(n)]


def _event(event_id: str, fields: Dict[str, str], part: int) -> Event:
    return Event(
        event_id=event_id,
        type=fields.get("type", ""),
        id=fields.get("id", ""),
        queue=fields.get("queue", ""),
        at=_int(fields.get("at")) or 0,
        fields=fields,
        part=part,
    )
