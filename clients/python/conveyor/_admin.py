"""Queue control for Client and AsyncClient, written once: each operation is a generator that
yields the Redis calls it needs (a command, a pipeline, a Lua script) and gets their replies
back; Client runs them with redis-py, AsyncClient awaits them (client.py's reads, waits and
enqueue_flow are written the same way). The keys, arguments and scripts are those of the
TypeScript admin (queue/control.ts, admin.ts, schedules.ts, groups.ts, resources.ts), so either
side reads what the other wrote."""

import json
import math
import re
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Dict, Generator, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from redis.exceptions import ResponseError

from . import _json
from ._keys import PIPELINES_KEY, QUEUES_KEY, PipelineKeys, QueueKeys, check_job_id, check_queue, pipeline_of
from ._keys_generated import DOORBELL_CHANNEL_KEY
from . import _gateway
from ._gateway import Script


class InvalidArgumentError(ValueError):
    """An argument of a queue-control call that the TypeScript side would refuse too; the message names it."""


class Call(NamedTuple):
    """One Redis command: the redis-py method's name and its arguments."""

    method: str
    args: Tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = {}


class Pipe(NamedTuple):
    """Commands sent together (MULTI/EXEC unless on a cluster); the reply is their replies.
    raise_on_error False: a failed command's reply is its exception."""

    calls: Sequence[Call]
    transaction: bool = True
    raise_on_error: bool = True


Step = Union[Call, Pipe, Script]
Op = Generator[Step, Any, Any]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _queue(queue: Any) -> str:
    return check_queue(queue)


# -- pause, resume, rate limit (queue/control.ts) ---------------------------------------------

#: The windows a queue rate limit is written with ("20/s"), in ms.
_PER = {"s": 1000, "m": 60_000, "h": 3_600_000}
MAX_RATE = 1_000_000
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(s|m|h)\s*$")


class RateLimit(NamedTuple):
    """At most `max` job starts in any window of `per_ms` milliseconds, across every worker."""

    max: int
    per_ms: int

    def __str__(self) -> str:
        unit = next((u for u, ms in _PER.items() if ms == self.per_ms), None)
        return f"{self.max}/{unit or f'{self.per_ms}ms'}"


def parse_rate(rate: Any, what: str = "rate") -> RateLimit:
    """"20/s", "100/m", "5/h" or a RateLimit → a checked RateLimit (as parseRateLimit)."""
    if isinstance(rate, RateLimit):
        limit = rate
    elif isinstance(rate, str):
        m = _RATE.match(rate)
        if not m:
            raise InvalidArgumentError(f"{what}: invalid rate limit {rate!r}: expected <N>/<s|m|h>, e.g. 20/s, 100/m, 5/h")
        limit = RateLimit(int(m.group(1)), _PER[m.group(2)])
    else:
        raise InvalidArgumentError(f"{what} must be a string like '20/s' or a RateLimit, got {rate!r}")
    if isinstance(limit.max, bool) or not isinstance(limit.max, int) or not 1 <= limit.max <= MAX_RATE:
        raise InvalidArgumentError(f"{what}: the maximum must be an integer 1..{MAX_RATE}, got {limit.max!r}")
    if isinstance(limit.per_ms, bool) or not isinstance(limit.per_ms, int) or not 1 <= limit.per_ms <= 24 * 3_600_000:
        raise InvalidArgumentError(f"{what}: the window must be 1 ms..24 h in whole ms, got {limit.per_ms!r}")
    return limit


def _stored_rate(stored: Optional[str]) -> Optional[RateLimit]:
    m = re.match(r"^(\d+)/(\d+)$", stored or "")
    return RateLimit(int(m.group(1)), int(m.group(2))) if m else None


class QueueControl(NamedTuple):
    """Whether the queue is paused, and its rate limit (None: none)."""

    paused: bool
    rate_limit: Optional[RateLimit]


def _control_event(queue: str, type: str, *fields: str) -> Call:
    """A queue control event in the queue's event stream (as control.ts's controlEvent)."""
    values: Dict[str, str] = {"type": type, "id": "", "queue": queue, "at": str(_now_ms())}
    for i in range(0, len(fields), 2):
        values[fields[i]] = fields[i + 1]
    return Call("xadd", (QueueKeys(queue).events, values), {"maxlen": 10_000, "approximate": True})


def _meta_layout(raw: Any) -> int:
    """The layout in force as mirrored in `<P>meta` field `layout` (absent: 1)."""
    try:
        n = int(raw or 1)
    except (TypeError, ValueError):
        return 1
    return n if n >= 1 else 1


def _pause_fields(queue: str, layout: int) -> list:
    """The fields a pause sets and a resume removes under the layout in force (queue/control.ts):
    `hold:` from layout 2 on (`paused:` is then the fence against the release before layouts); at
    layout 1 both, so a finalize between reading the layout and the write leaves the pause in force."""
    return [f"hold:{queue}"] if layout >= 2 else [f"paused:{queue}", f"hold:{queue}"]


def _pause_field(queue: str, layout: int) -> str:
    """The field whose '1' means "paused" under the layout in force."""
    return f"hold:{queue}" if layout >= 2 else f"paused:{queue}"


def pause(queue: str) -> Op:
    k = QueueKeys(_queue(queue))
    layout = _meta_layout((yield Call("hget", (k.meta, "layout"))))
    yield Call("hset", (k.meta,), {"mapping": {f: "1" for f in _pause_fields(queue, layout)}})
    yield _control_event(queue, "paused")


def resume(queue: str) -> Op:
    k = QueueKeys(_queue(queue))
    layout = _meta_layout((yield Call("hget", (k.meta, "layout"))))
    yield Pipe([Call("hdel", (k.meta, *_pause_fields(queue, layout))), Call("lpush", (k.wake, "1")), Call("delete", (k.doorbell,))])
    # A pool held at zero while paused has jobs and no worker: ring for it. A ring refused (an
    # ACL user without the channel) leaves the operator to see it at its next poll.
    try:
        yield Call("publish", (DOORBELL_CHANNEL_KEY, k.doorbell))
    except ResponseError:
        pass
    yield _control_event(queue, "resumed")


def control(queue: str) -> Op:
    k = QueueKeys(_queue(queue))
    names = ["layout", f"rate:{queue}", f"paused:{queue}", f"hold:{queue}"]
    read = dict(zip(names, (yield Call("hmget", (k.meta, names)))))
    paused = read[_pause_field(queue, _meta_layout(read["layout"]))]
    return QueueControl(paused == "1", _stored_rate(read[f"rate:{queue}"]))


def set_rate_limit(queue: str, rate: Union[str, RateLimit, None]) -> Op:
    k = QueueKeys(_queue(queue))
    if rate is None or rate == "off":
        yield Pipe([Call("hdel", (k.meta, f"rate:{queue}", f"rlog:{queue}")), Call("lpush", (k.wake, "1"))])
        yield _control_event(queue, "rateLimit", "rateLimit", "off")
        return None
    limit = parse_rate(rate)
    yield Pipe([Call("hset", (k.meta, f"rate:{queue}", f"{limit.max}/{limit.per_ms}")), Call("lpush", (k.wake, "1"))])
    yield _control_event(queue, "rateLimit", "rateLimit", str(limit))
    return limit


# -- dead letters (queue/admin.ts) ------------------------------------------------------------


@dataclass
class DeadLetter:
    """A dead-lettered job: when it died (ms since the epoch), why, after how many attempts."""

    id: str
    dead_at: int
    reason: str
    attempts_made: int
    error: Optional[str] = None


#: Jobs per retry_dead / purge_dead script call when all are moved (as the TypeScript admin).
DEAD_CHUNK = 500


def _count(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgumentError(f"{what} must be an integer {low}..{high}, got {value!r}")
    return value


def dead_letters(queue: str, limit: int, offset: int) -> Op:
    k = QueueKeys(_queue(queue))
    _count(limit, "limit", 1, 100_000)
    _count(offset, "offset", 0, 2**53)
    entries = yield Call("zrange", (k.dead, offset, offset + limit - 1), {"withscores": True})
    if not entries:
        return []
    replies = yield Pipe(
        [Call("hmget", (k.job(i), ["deadReason", "attemptsMade", "error"])) for i, _ in entries],
        transaction=False,
        raise_on_error=False,
    )
    out: List[DeadLetter] = []
    for (job_id, score), fields in zip(entries, replies):
        if isinstance(fields, Exception):
            # another client replaced the record with a non-hash after it was dead-lettered
            kind = yield Call("type", (k.job(job_id),))
            fields = [f"malformed: job key is a {kind}, not a hash", "0", None]
        reason, attempts, error = fields
        out.append(DeadLetter(job_id, int(score), reason or "", int(attempts or 0), error))
    return out


def retry_dead(queue: str, ids: Optional[Iterable[str]]) -> Op:
    k = QueueKeys(_queue(queue))
    if ids is not None:
        if isinstance(ids, (str, bytes)):
            raise InvalidArgumentError(f"ids must be a list of job ids, got the string {ids!r}")
        wanted = list(dict.fromkeys(check_job_id(i) for i in ids))
        if not wanted:
            return 0
        return int((yield _gateway.retry_dead(k, ids=wanted)))
    total = 0
    while True:
        moved = int((yield _gateway.retry_dead(k, limit=DEAD_CHUNK)))
        total += moved
        if moved == 0:
            return total


def purge_dead(queue: str) -> Op:
    k = QueueKeys(_queue(queue))
    total = 0
    while True:
        n = _gateway.count_reply((yield _gateway.purge_dead(k, limit=DEAD_CHUNK)), "purged")
        total += n
        if n == 0:
            return total


# -- schedules (queue/schedules.ts) ------------------------------------------------------------

_SCHEDULE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MIN_EVERY_MS = 1000


@dataclass
class Schedule:
    """A queue's repeating job: every `every_ms` or on `cron` in `tz`; its next run (ms) or None."""

    name: str
    data: Any
    attempts: int
    next_run: Optional[int]
    every_ms: Optional[int] = None
    cron: Optional[str] = None
    tz: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


def _schedule_name(name: Any) -> str:
    if not isinstance(name, str) or not _SCHEDULE_NAME.match(name):
        raise InvalidArgumentError(
            f"invalid schedule name {name!r}: use letters, digits, '.', '_', '-' (at most 100)"
        )
    return name


def _duration_ms(value: Any, what: str) -> int:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        raise InvalidArgumentError(f"{what} must be a number of seconds (or a timedelta), got {value!r}")
    return int(math.floor(seconds * 1000 + 0.5))


def add_schedule(
    queue: str, name: str, every: Any, cron: Optional[str], tz: Optional[str], data: Any, attempts: Optional[int]
) -> Op:
    k = QueueKeys(_queue(queue))
    _schedule_name(name)
    if (every is None) == (cron is None):
        raise InvalidArgumentError("a schedule needs exactly one of every (an interval) or cron (an expression)")
    now = _now_ms()
    stored: Dict[str, Any] = {"name": name}
    if every is not None:
        every_ms = _duration_ms(every, "every")
        if every_ms < MIN_EVERY_MS:
            raise InvalidArgumentError(f"every must be at least {MIN_EVERY_MS // 1000} s, got {every!r}")
        if tz is not None:
            raise InvalidArgumentError("tz applies to cron schedules only")
        stored["everyMs"] = every_ms
        first: Optional[int] = now + every_ms
    else:
        from ._cron import CronError, next_run

        if not isinstance(cron, str):
            raise InvalidArgumentError(f"cron must be a string, got {cron!r}")
        try:
            first = next_run(cron, tz, now)
        except CronError as err:
            raise InvalidArgumentError(str(err)) from None
        if first is None:
            raise InvalidArgumentError(f"cron expression {cron!r} never fires")
        stored["cron"] = cron
        if tz is not None:
            stored["tz"] = tz
    attempts = 3 if attempts is None else _count(attempts, "attempts", 1, 1000)
    try:
        stored["data"] = _json.dumps(data)
    except ValueError as err:
        raise InvalidArgumentError(f"schedule data is not JSON: {err}") from None
    version = f"{now}-{secrets.token_hex(4)}"
    stored.update(attempts=attempts, anchor=now, version=version, createdAt=now)
    yield _gateway.schedule_remove(k, name)
    yield Call("sadd", (PIPELINES_KEY, k.pipeline))
    yield Call("hset", (k.schedules, name, _json.dumps(stored)))
    if first is not None:
        yield _gateway.schedule_tick(k, name, now=now, version=version, tick=first)
    return _schedule(stored, first)


def _schedule(stored: Mapping[str, Any], next_run: Optional[int]) -> Schedule:
    data = stored.get("data", "null")
    try:
        value = json.loads(data)
    except ValueError:
        value = data
    return Schedule(
        name=str(stored.get("name")),
        data=value,
        attempts=int(stored.get("attempts", 3)),
        next_run=next_run,
        every_ms=stored.get("everyMs"),
        cron=stored.get("cron"),
        tz=stored.get("tz"),
        raw=dict(stored),
    )


def schedules(queue: str) -> Op:
    raw = yield Call("hgetall", (QueueKeys(_queue(queue)).schedules,))
    out = []
    for name in sorted(raw):
        if name.startswith("next:"):
            continue
        try:
            stored = json.loads(raw[name])
        except ValueError:
            continue  # not ours: skipped
        if not isinstance(stored, dict):
            continue
        nxt = raw.get(f"next:{name}")
        out.append(_schedule(stored, int(nxt) if nxt else None))
    return out


def remove_schedule(queue: str, name: str) -> Op:
    k = QueueKeys(_queue(queue))
    _schedule_name(name)
    return _gateway.count_reply((yield _gateway.schedule_remove(k, name)), "existed") == 1


# -- groups (queue/groups.ts) -------------------------------------------------------------------

GROUP_MAX_BYTES = 128


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: A group setting left as it is (None removes it).
UNSET: Any = _Unset()


def check_group(group: Any) -> str:
    if not isinstance(group, str) or group == "":
        raise InvalidArgumentError(f"group must be a non-empty string, got {group!r}")
    size = len(group.encode("utf-8"))
    if size > GROUP_MAX_BYTES:
        raise InvalidArgumentError(f"group is {size} bytes, limit {GROUP_MAX_BYTES}")
    return group


def _group_control(k: QueueKeys, action: str, group: str, value: str = "") -> Script:
    return _gateway.group_control(k, action, group, value)


def set_group(queue: str, group: Optional[str], concurrency: Any, rate: Any, weight: Any, on_dead: Any) -> Op:
    k = QueueKeys(_queue(queue))
    if group is not None:
        check_group(group)
    if all(v is UNSET for v in (concurrency, rate, weight, on_dead)):
        raise InvalidArgumentError("set_group needs concurrency, rate, weight or on_dead (None removes one)")
    if concurrency not in (UNSET, None):
        _count(concurrency, "concurrency", 1, 1_000_000)
    limit = None if rate in (UNSET, None) else parse_rate(rate, "rate")
    if weight is not UNSET:
        if group is None:
            raise InvalidArgumentError("weight is set per group: name one")
        if weight is not None:
            _count(weight, "weight", 1, 1000)
    if on_dead not in (UNSET, None, "block", "continue"):
        raise InvalidArgumentError(f"on_dead must be 'block', 'continue' or None, got {on_dead!r}")
    g = group or ""
    if concurrency is not UNSET:
        yield _group_control(k, "limit", g, "" if concurrency is None else str(concurrency))
    if rate is not UNSET:
        yield _group_control(k, "rate", g, "" if limit is None else f"{limit.max}/{limit.per_ms}")
    if weight is not UNSET:
        yield _group_control(k, "weight", g, "" if weight is None else str(weight))
    if on_dead is not UNSET:
        yield _group_control(k, "onDead", g, on_dead or "")


def pause_group(queue: str, group: str, paused: bool) -> Op:
    k = QueueKeys(_queue(queue))
    yield _group_control(k, "pause" if paused else "resume", check_group(group))


@dataclass
class GroupState:
    """One group: its waiting and running jobs and its settings (its own, else the queue's default)."""

    group: str
    waiting: int
    running: int
    concurrency: Optional[int]
    override: bool
    rate: Optional[RateLimit]
    paused: bool
    weight: int
    on_dead: str
    blocked_by: Optional[str]


@dataclass
class QueueGroups:
    """A queue's group defaults, its waiting jobs in all groups, and each group with work or a
    setting (most waiting first)."""

    default_concurrency: Optional[int]
    default_rate: Optional[RateLimit]
    default_on_dead: str
    waiting: int
    groups: List[GroupState]


_GROUP_FIELD = re.compile(r"^(?:concurrency|paused|rate|weight|onDead):(.+)$", re.S)


def groups(queue: str) -> Op:
    k = QueueKeys(_queue(queue))
    waiting, running, ctl = yield Pipe(
        [Call("hgetall", (k.group_waiting,)), Call("hgetall", (k.group_running,)), Call("hgetall", (k.group_control,))],
        transaction=False,
    )
    default_concurrency = int(ctl["concurrency"]) if ctl.get("concurrency") else None
    names = {g for g in waiting if g != ""} | set(running)
    for f in ctl:
        m = _GROUP_FIELD.match(f)
        if m:
            names.add(m.group(1))
    out = []
    for g in names:
        own = ctl.get(f"concurrency:{g}")
        out.append(
            GroupState(
                group=g,
                waiting=max(0, int(waiting.get(g, 0))),
                running=max(0, int(running.get(g, 0))),
                concurrency=int(own) if own else default_concurrency,
                override=own is not None,
                rate=_stored_rate(ctl.get(f"rate:{g}", ctl.get("rate"))),
                paused=ctl.get(f"paused:{g}") == "1",
                weight=int(ctl.get(f"weight:{g}", 1)),
                on_dead="block" if ctl.get(f"onDead:{g}", ctl.get("onDead")) == "block" else "continue",
                blocked_by=ctl.get(f"blockedBy:{g}"),
            )
        )
    # (as the TypeScript listing: most waiting, then most running, then by name in UTF-16 order)
    out.sort(key=lambda s: (-s.waiting, -s.running, s.group.encode("utf-16-be")))
    return QueueGroups(
        default_concurrency=default_concurrency,
        default_rate=_stored_rate(ctl.get("rate")),
        default_on_dead="block" if ctl.get("onDead") == "block" else "continue",
        waiting=max(0, int(waiting.get("", 0))),
        groups=out,
    )


# -- resources (queue/resources.ts) -------------------------------------------------------------

_RESOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_UNIT = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_LIMIT = re.compile(r"^\s*([^=\s]+)\s*=\s*(\d+)\s*/\s*(\d*)\s*(ms|s|m|h)\s*$")
_WINDOW_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
MAX_AMOUNT = 10**12
DEFAULT_CEILING = 0.9


class ResourceLimit(NamedTuple):
    """At most `max` of `unit` (requests, tokens, …) in any window of `window_ms`."""

    unit: str
    max: int
    window_ms: int


@dataclass
class ResourceLimitState:
    unit: str
    max: int
    window_ms: int
    used: int
    utilization: float


@dataclass
class ResourceKeyState:
    id: str
    limits: List[ResourceLimitState]
    benched_until: Optional[int]
    admitted: int


@dataclass
class ResourceState:
    """A resource of a pipeline: its ceiling, each key's use of each limit, jobs waiting for budget."""

    pipeline: str
    name: str
    ceiling: float
    keys: List[ResourceKeyState]
    waiting: int
    waiting_by_queue: Dict[str, int]


def _resource_name(name: Any, what: str = "resource name") -> str:
    if not isinstance(name, str) or not _RESOURCE_NAME.match(name):
        raise InvalidArgumentError(
            f"{what} {name!r} is invalid: use letters, digits, '.', '_', '-' (at most 64, starting with a letter or digit)"
        )
    return name


def _resource_pipeline(pipeline_or_queue: Any) -> str:
    try:
        return pipeline_of(pipeline_or_queue)
    except ValueError:
        raise InvalidArgumentError(
            f"pipeline {pipeline_or_queue!r} is invalid: give a pipeline or queue name"
        ) from None


def _check_limit(limit: ResourceLimit, what: str) -> None:
    if not isinstance(limit.unit, str) or not _UNIT.match(limit.unit):
        raise InvalidArgumentError(
            f"{what}: unit {limit.unit!r} is invalid: use lower-case letters, digits, '_' (at most 32, starting with a letter)"
        )
    if isinstance(limit.max, bool) or not isinstance(limit.max, int) or not 1 <= limit.max <= MAX_AMOUNT:
        raise InvalidArgumentError(f"{what}: {limit.unit} max must be an integer 1..{MAX_AMOUNT}, got {limit.max!r}")
    if (
        isinstance(limit.window_ms, bool)
        or not isinstance(limit.window_ms, int)
        or not 1 <= limit.window_ms <= 24 * 3_600_000
    ):
        raise InvalidArgumentError(f"{what}: {limit.unit} window must be 1 ms..24 h in whole ms, got {limit.window_ms!r}")


def parse_limits(text: str, what: str = "limits") -> List[ResourceLimit]:
    """"requests=60/m,tokens=200000/m" → limits (windows /s /m /h, /2s, /500ms), as the CLI's --limit."""
    out: List[ResourceLimit] = []
    for part in text.split(","):
        m = _LIMIT.match(part)
        if not m:
            raise InvalidArgumentError(
                f"{what}: {part.strip()!r} is not <unit>=<max>/<window>, e.g. requests=60/m, tokens=200000/m, requests=10/2s"
            )
        count = 1 if m.group(3) == "" else int(m.group(3))
        if count < 1:
            raise InvalidArgumentError(f"{what}: {part.strip()}: the window must be positive")
        limit = ResourceLimit(m.group(1), int(m.group(2)), count * _WINDOW_UNITS[m.group(4)])
        _check_limit(limit, what)
        if any(l.unit == limit.unit for l in out):
            raise InvalidArgumentError(f"{what}: {limit.unit} is limited twice")
        out.append(limit)
    return out


def set_resource(pipeline_or_queue: str, name: str, keys: Mapping[str, Any], ceiling: Any) -> Op:
    pipeline = _resource_pipeline(pipeline_or_queue)
    _resource_name(name)
    if isinstance(ceiling, bool) or not isinstance(ceiling, (int, float)) or not 0 < ceiling <= 1:
        raise InvalidArgumentError(f"ceiling must be a number in (0, 1], got {ceiling!r}")
    if not isinstance(keys, Mapping) or not keys:
        raise InvalidArgumentError(f"resource {name}: keys must be a mapping {{key id: limits}} with at least one key")
    if len(keys) > 1000:
        raise InvalidArgumentError(f"resource {name}: {len(keys)} keys, limit 1000")
    specs: List[Tuple[str, str]] = []
    for key_id, given in keys.items():
        _resource_name(key_id, f"resource {name}: key id")
        what = f"resource {name} key {key_id}"
        if isinstance(given, str):
            limits = parse_limits(given, what)
        elif isinstance(given, Sequence) and given:
            limits = [ResourceLimit(*l) if not isinstance(l, ResourceLimit) else l for l in given]
            units = set()
            for l in limits:
                _check_limit(l, what)
                if l.unit in units:
                    raise InvalidArgumentError(f"{what}: {l.unit} is limited twice")
                units.add(l.unit)
        else:
            raise InvalidArgumentError(f"{what} has no limit: give 'requests=60/m,…' or a list of ResourceLimit")
        specs.append((key_id, ",".join(f"{l.unit}={l.max}/{l.window_ms}" for l in limits)))
    pk = PipelineKeys(pipeline)
    yield _gateway.resource_set(pk, name, ceiling=_json._js_number(float(ceiling)), keys=specs)
    yield Call("sadd", (PIPELINES_KEY, pipeline))


def remove_resource(pipeline_or_queue: str, name: str) -> Op:
    pk = PipelineKeys(_resource_pipeline(pipeline_or_queue))
    _resource_name(name)
    return _gateway.count_reply((yield _gateway.resource_remove(pk, name)), "existed") == 1


def bench_resource_key(pipeline_or_queue: str, name: str, key: str, until: Any) -> Op:
    pk = PipelineKeys(_resource_pipeline(pipeline_or_queue))
    _resource_name(name)
    _resource_name(key, "key id")
    if isinstance(until, datetime):
        until_ms = int(round(until.timestamp() * 1000))
    elif not isinstance(until, bool) and isinstance(until, (int, float)) and math.isfinite(until):
        until_ms = int(round(until * 1000))
    else:
        raise InvalidArgumentError(f"until must be a datetime or seconds since the epoch, got {until!r}")
    yield _gateway.resource_bench(pk, name, key, until_ms=until_ms)


def _window_used(log: Optional[str], window_ms: int, now: int) -> int:
    used = 0
    for entry in (log or "").split(","):
        m = re.match(r"^(\d+):(-?\d+)$", entry)
        if m and int(m.group(1)) > now - window_ms:
            used += int(m.group(2))
    return max(0, used)


def _resource_state(pipeline: str, name: str, h: Mapping[str, str], now: int, waiting: Dict[str, int]) -> ResourceState:
    try:
        ceiling = float(h.get("ceiling", DEFAULT_CEILING))
    except ValueError:
        ceiling = DEFAULT_CEILING
    keys = []
    for key_id in [i for i in h.get("keys", "").split(",") if i]:
        limits = []
        for part in h.get(f"limits:{key_id}", "").split(","):
            m = re.match(r"^([^=]+)=(\d+)/(\d+)$", part)
            if m:
                unit, mx, window = m.group(1), int(m.group(2)), int(m.group(3))
                used = _window_used(h.get(f"log:{key_id}:{unit}"), window, now)
                limits.append(ResourceLimitState(unit, mx, window, used, used / mx))
        bench = int(float(h.get(f"bench:{key_id}", 0) or 0))
        keys.append(ResourceKeyState(key_id, limits, bench if bench > now else None, int(h.get(f"admitted:{key_id}", 0))))
    return ResourceState(
        pipeline, name, ceiling if math.isfinite(ceiling) else DEFAULT_CEILING, keys, sum(waiting.values()), waiting
    )


def _budget_waiting(pipeline: str) -> Op:
    """Jobs waiting for each resource's budget, per queue of the pipeline."""
    out: Dict[str, Dict[str, int]] = {}
    for queue in sorted((yield Call("smembers", (QUEUES_KEY,)))):
        try:
            if pipeline_of(queue) != pipeline:
                continue
        except ValueError:
            continue
        k = QueueKeys(queue)
        waits = yield Call("hgetall", (k.group_budget,))
        if not waits:
            continue
        groups = list(waits)
        counts = yield Call("hmget", (k.group_waiting, groups))
        for g, n in zip(groups, counts):
            if int(n or 0) > 0:
                by_queue = out.setdefault(waits[g], {})
                by_queue[queue] = by_queue.get(queue, 0) + int(n)
    return out


def resources(pipeline_or_queue: Optional[str]) -> Op:
    if pipeline_or_queue is None:
        pipelines = sorted((yield Call("smembers", (PIPELINES_KEY,))))
    else:
        pipelines = [_resource_pipeline(pipeline_or_queue)]
    out: List[ResourceState] = []
    for pipeline in pipelines:
        pk = PipelineKeys(pipeline)
        names = sorted((yield Call("smembers", (pk.resources,))))
        if not names:
            continue
        waiting = yield from _budget_waiting(pipeline)
        now = _now_ms()
        for name in names:
            h = yield Call("hgetall", (pk.resource(name),))
            if h.get("keys"):
                out.append(_resource_state(pipeline, name, h, now, waiting.get(name, {})))
    return out
