"""The one place the Python client calls the Lua scripts (queue/gateway.ts is the TypeScript one).

One function per script takes its inputs by name and returns the `Script` step that runs it, with
KEYS and ARGV in the order the script's header gives (each order written here once); the sync and
async clients run the step (client.py, aio.py). Nothing else builds a script's KEYS or ARGV.
"""

import json
import time
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ._keys import PipelineKeys, QueueKeys


class Script(NamedTuple):
    """One of the shared Lua scripts (queue/scripts/<name>.lua), run by the client."""

    name: str
    keys: Sequence[str]
    args: Sequence[Any]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _record(**fields: Any) -> str:
    """A call's settings as the scripts take them: one named record, a JSON object
    (queue/scripts/includes/wire.lua). A field that is None is left out: the script's default."""
    return json.dumps({k: v for k, v in fields.items() if v is not None}, separators=(",", ":"), ensure_ascii=False)


def _named(reply: Sequence[Any]) -> Dict[str, Any]:
    """A script's named reply (name/value pairs, an absent field left out) as a dict."""
    return {str(reply[i]): reply[i + 1] for i in range(0, len(reply) - 1, 2)}


def count_reply(reply: Sequence[Any], name: str) -> int:
    """The count a script's named reply gives as `name` (purged, existed, …)."""
    return int(_named(reply)[name])


# -- enqueue ------------------------------------------------------------------------------------

#: enqueue_jobs' optional record fields, in the order they are sent (queue/gateway.ts, EnqueueRecord).
ENQUEUE_OPTIONAL_FIELDS = ("priority", "delayMs", "attempts", "timeoutMs", "idempotencyKey", "contentHash", "trace",
                           "group", "dedupe", "uses", "task", "notify")


def enqueue_record_args(records: Sequence[Mapping[str, Any]]) -> Tuple[List[str], List[Any]]:
    """The names of the fields these records have (`id`, `data` first; a field none of them has is
    not sent) and, after enqueue_jobs' call record, each record's values in that order."""
    fields = ["id", "data"] + [f for f in ENQUEUE_OPTIONAL_FIELDS if any(f in r for r in records)]
    values: List[Any] = []
    for r in records:
        values.extend(r.get(f, "") for f in fields)
    return fields, values


def enqueue_jobs(k: QueueKeys, *, max_payload_bytes: int, idempotency_ttl_seconds: int,
                 records: Sequence[Mapping[str, Any]], contract_hash: str) -> Script:
    """Reply: ids and codes by name, per job its id and 1 created, 0 existing, 2 replaced
    (enqueue_reply())."""
    fields, values = enqueue_record_args(records)
    record = _record(jobPrefix=k.job_prefix, idempotencyPrefix=k.idempotency_prefix, queue=k.queue, now=_now_ms(),
                     maxPayloadBytes=max_payload_bytes, idempotencyTtlSeconds=idempotency_ttl_seconds,
                     jobFields=fields, contract=contract_hash or None)
    return Script("enqueue_jobs", [k.ready, k.delayed, k.counts, k.wake, k.outbox, k.meta, k.seq, k.contract],
                  [record, *values])


def enqueue_reply(reply: Sequence[Any]) -> List[Tuple[str, int]]:
    """enqueue_jobs' reply by job: (id, code), code 1 created, 0 existing, 2 replaced (a debounce
    gave the waiting job this job's data; the id is that job's)."""
    r = _named(reply)
    return [(str(job_id), int(code)) for job_id, code in zip(r["ids"], r["codes"])]


def enqueue_flow(pk: PipelineKeys, flow_id: str, *, max_payload_bytes: int, queues: Sequence[str],
                 contract_hashes: Sequence[str], fields: Sequence[str], rows: Sequence[Sequence[Any]],
                 idempotency_key: Optional[str] = None) -> Script:
    """`fields` names the per-job fields, each of `rows` one job's values in that order; `queues`
    the flow's queues, `contract_hashes` the hash each one's jobs were checked against. Reply, by
    name: written (the number of jobs), or for an `idempotency_key` already taken flowId and ids
    (each job's id in the call's order) (flow_reply())."""
    keys = [pk.outbox, pk.meta, pk.seq, pk.flow(flow_id)]
    for q in queues:
        k = QueueKeys(q)
        keys += [k.ready, k.delayed, k.counts, k.wake, k.contract]
    if idempotency_key is not None:
        keys.append(pk.flow_idempotency(idempotency_key))
    hashes = {q: h for q, h in zip(queues, contract_hashes) if h}
    args: List[Any] = [_record(jobPrefix=pk.job_prefix, flowId=flow_id, now=_now_ms(), maxPayloadBytes=max_payload_bytes,
                               queues=list(queues), contractHashes=hashes or None, jobFields=list(fields))]
    for row in rows:
        args.extend(row)
    return Script("enqueue_flow", keys, args)


def flow_reply(reply: Sequence[Any]) -> Optional[Tuple[str, List[str]]]:
    """enqueue_flow's reply: None when the flow was written, else (the flow written before under
    the idempotency key, its jobs' ids in the call's order)."""
    r = _named(reply)
    if "flowId" not in r:
        return None
    return str(r["flowId"]), [str(i) for i in r["ids"]]


# -- jobs ---------------------------------------------------------------------------------------

def cancel_job(pk: PipelineKeys, job_id: str, *, retention_seconds: int) -> Script:
    """Reply: outcome, state, queue, jobs cancelled, by name (cancel_reply())."""
    return Script("cancel_job", [pk.outbox, pk.meta],
                  [_record(jobPrefix=pk.job_prefix, id=job_id, now=_now_ms(), retentionSeconds=retention_seconds or None)])


class CancelReply(NamedTuple):
    outcome: str
    state: str
    queue: str
    jobs_cancelled: int


def cancel_reply(reply: Sequence[Any]) -> CancelReply:
    r = _named(reply)
    return CancelReply(str(r["outcome"]), str(r.get("state", "")), str(r.get("queue", "")), int(r["jobsCancelled"]))


def job_states(pk: PipelineKeys, ids: Sequence[str], *, whole: bool, fields: Sequence[str]) -> Script:
    """Reply: per key its fields by name (job_state_reply())."""
    return Script("job_states", [pk.job(j) for j in ids], [_record(whole=whole or None), *fields])


def job_state_reply(reply: Sequence[Any]) -> Dict[str, Any]:
    """One key's job_states reply as a dict: `type` when it is not a hash ('none': no such key),
    else the fields read that the record has and, for an ended job read whole, `record` (a dict)."""
    r = _named(reply)
    if "record" in r:
        r["record"] = _named(r["record"])
    return r


def retry_dead(k: QueueKeys, *, ids: Optional[Sequence[str]] = None, limit: int = 0) -> Script:
    """These dead jobs back to ready, or (no `ids`) up to `limit` of the oldest. Reply: how many moved."""
    if ids is not None:
        args: List[Any] = [_record(jobPrefix=k.job_prefix, queue=k.queue, now=_now_ms()), *ids]
    else:
        args = [_record(jobPrefix=k.job_prefix, queue=k.queue, now=_now_ms(), limit=limit)]
    return Script("retry_dead", [k.dead, k.ready, k.counts, k.wake, k.outbox, k.meta], args)


def purge_dead(k: QueueKeys, *, limit: int) -> Script:
    """Reply: purged, by name (how many were deleted)."""
    return Script("purge_dead", [k.dead], [_record(jobPrefix=k.job_prefix, limit=limit)])


# -- schedules, groups, resources ---------------------------------------------------------------

def schedule_remove(k: QueueKeys, name: str) -> Script:
    """Reply: existed, by name (1 when the schedule existed)."""
    return Script("schedule_remove", [k.schedules, k.delayed], [_record(jobPrefix=k.job_prefix, name=name)])


def schedule_tick(k: QueueKeys, name: str, *, now: int, version: str, tick: int) -> Script:
    return Script(
        "schedule_tick",
        [k.schedules, k.ready, k.delayed, k.counts, k.wake, k.outbox, k.meta, k.seq],
        [_record(jobPrefix=k.job_prefix, queue=k.queue, now=now, name=name, version=str(version) or None, tick=tick)],
    )


def group_control(k: QueueKeys, action: str, group: str, value: str = "") -> Script:
    """`group` '' = every group, `value` '' = remove the setting (both left out of the record).
    Reply: regrouped, by name (groups re-admitted)."""
    return Script("group_control", [k.group_control, k.group_waiting, k.group_ring, k.wake],
                  [_record(action=action, group=group or None, value=value or None)])


def resource_set(pk: PipelineKeys, name: str, *, ceiling: str, keys: Sequence[Sequence[str]]) -> Script:
    """`keys`: each key's id and its limits as `unit=max/windowMs,…`."""
    args: List[Any] = [_record(ceiling=ceiling)]
    for key_id, limits in keys:
        args += [key_id, limits]
    return Script("resource_set", [pk.resource(name), pk.resources], args)


def resource_remove(pk: PipelineKeys, name: str) -> Script:
    """Reply: existed, by name (1 when it existed)."""
    return Script("resource_remove", [pk.resource(name), pk.resources], [])


def resource_bench(pk: PipelineKeys, name: str, key: str, *, until_ms: int) -> Script:
    """resource_usage's bench form: `key` admits nothing until `until_ms`, for every worker."""
    return Script("resource_usage", [pk.resource(name)], [_record(key=key, at=0, now=_now_ms(), benchUntilMs=until_ms)])
