"""Client.enqueue_flow against a real Redis and real workers: a diamond (a → b, c → d) across
two stages runs in order and can be waited for; bad graphs are refused naming the problem.
Client.flow and AsyncClient.flow give what the TypeScript admin gives (`conveyor flow <id>
--json`) before, during and after a flow runs, when a parent's death cancels its dependents, and
on a Redis Cluster."""
import asyncio
import json
import time
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

from conftest import REPO, cli, ts, wait_for
from conveyor import Client, Flow, FlowJob, FlowResult, InvalidArgumentError, InvalidFlowError
from conveyor._keys import PipelineKeys, QueueKeys
from conveyor.aio import AsyncClient

HANDLER = f"module:{REPO / 'test' / 'fixtures' / 'recordingHandler.js'}"


def test_a_diamond_runs_in_order_and_is_waited_for(client: Client, start_worker: Any) -> None:
    from conftest import REPO

    flow = client.enqueue_flow("pf", [
        {"key": "d", "queue": "pf/one", "data": {"result": "D"}, "parents": ["b", "c"]},
        {"key": "b", "queue": "pf/two", "data": {"result": "B"}, "parents": ["a"], "on_parent_failure": "continue"},
        {"key": "a", "queue": "pf/one", "data": {"result": "A"}, "attempts": 2},
        {"key": "c", "queue": "pf/two", "data": {"result": "C"}, "parents": ["a"]},
    ])
    assert isinstance(flow, FlowResult) and sorted(flow.ids) == ["a", "b", "c", "d"]
    assert client.get_job(flow.ids["d"]).state == "waiting-children"
    assert client.get_job(flow.ids["a"]).state == "ready"
    assert client.get_job(flow.ids["b"]).raw["onParentFailure"] == "continue"

    handler = f"module:{REPO / 'test' / 'fixtures' / 'recordingHandler.js'}"
    for q in ("pf/one", "pf/two"):
        start_worker(q, handler, {"CONVEYOR_RETENTION": "1h"})
    out = client.wait(flow.ids.values(), timeout=120)
    assert {k: out[i].state for k, i in flow.ids.items()} == {k: "completed" for k in "abcd"}
    assert out[flow.ids["d"]].result == "D"
    started = {k: out[i].started_at for k, i in flow.ids.items()}
    finished = {k: out[i].finished_at for k, i in flow.ids.items()}
    assert started["b"] >= finished["a"] and started["c"] >= finished["a"]
    assert started["d"] >= max(finished["b"], finished["c"])


@pytest.mark.parametrize("jobs, message", [
    ([{"key": "a", "queue": "px/q", "data": 1, "parents": ["b"]}, {"key": "b", "queue": "px/q", "data": 1, "parents": ["a"]}],
     "the flow has a cycle: a, b wait for each other"),
    ([{"key": "a", "queue": "px/q", "data": 1, "parents": ["zz"]}], "parent 'zz' is not a key of this flow"),
    ([{"key": "a", "queue": "other/q", "data": 1}], "is not of pipeline px"),
    ([{"key": "a", "queue": "px/q", "data": 1, "on_parent_failure": "skip"}], "on_parent_failure must be fail, continue or ignore"),
    ([{"key": "a", "queue": "px/q", "data": 1, "content_hash": "h"}], "content_hash is not supported in a flow"),
    ([{"key": "a", "queue": "px/q", "data": 1}, {"key": "a", "queue": "px/q", "data": 2}], "flow job a: duplicate key"),
])
def test_a_bad_flow_is_refused_naming_the_problem(client: Client, jobs: Any, message: str) -> None:
    with pytest.raises(InvalidFlowError, match=message.replace("(", r"\(")):
        client.enqueue_flow("px", jobs)
    assert client.redis.keys("*{px}*") == []


# -- viewing a flow -----------------------------------------------------------------------------


def ts_view(url: str, flow_id: str, *args: str) -> Any:
    """The TypeScript admin's view of the flow (`conveyor flow <id> --json`), None when unknown."""
    out = cli(url, "flow", flow_id, "--json", *args)
    assert out.returncode in (0, 1) and out.stdout, out.stderr
    return json.loads(out.stdout)


def as_ts(flow: Optional[Flow]) -> Any:
    """A Python Flow in the TypeScript FlowView's shape, absent fields left out as JSON does."""
    if flow is None:
        return None
    jobs = []
    for j in flow.jobs:
        job: Dict[str, Any] = {"key": j.key, "id": j.id, "state": j.state, "queue": j.queue, "parents": j.parents,
                               "onParentFailure": j.policy}
        if j.pending is not None:
            job["pending"] = j.pending
        if j.reason is not None:
            job["reason"] = j.reason
        jobs.append(job)
    return {"id": flow.id, "pipeline": flow.pipeline, "createdAt": flow.created_at, "counts": flow.counts, "jobs": jobs}


def states(flow: Flow) -> Dict[str, Any]:
    return {j.key: (j.state, j.pending) for j in flow.jobs}


def test_a_flow_viewed_before_during_and_after_it_runs_is_the_typescript_view(
    client: Client, redis_url: str, start_worker: Any, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    t0 = int(time.time() * 1000)
    # (keys whose order by localeCompare is not their code-point order)
    flow = client.enqueue_flow("pv", [
        {"key": "root", "queue": "pv/one", "data": {"result": "R"}},
        {"key": "Left", "queue": "pv/two", "data": {"untilFile": str(gate), "result": "L"}, "parents": ["root"],
         "on_parent_failure": "continue"},
        {"key": "right", "queue": "pv/two", "data": {"result": "r"}, "parents": ["root"], "on_parent_failure": "ignore"},
        {"key": "Sink", "queue": "pv/one", "data": {"result": "S"}, "parents": ["Left", "right"]},
    ])
    before = client.flow(flow.flow_id)
    assert before is not None and before.id == flow.flow_id and before.pipeline == "pv"
    assert t0 <= before.created_at <= int(time.time() * 1000)
    assert before.jobs[0] == FlowJob("Left", flow.ids["Left"], "pv/two", "waiting-children", ["root"], "continue", 1)
    assert [j.key for j in before.jobs] == ["Left", "right", "root", "Sink"]
    assert states(before) == {"Left": ("waiting-children", 1), "right": ("waiting-children", 1),
                              "root": ("ready", None), "Sink": ("waiting-children", 2)}
    assert [j.policy for j in before.jobs] == ["continue", "ignore", "fail", "fail"]
    assert before.jobs[3].parents == ["Left", "right"]
    assert before.counts == {"waiting-children": 3, "ready": 1}
    assert as_ts(before) == ts_view(redis_url, flow.flow_id)

    start_worker("pv/one", HANDLER, {"CONVEYOR_RETENTION": "1h"})
    start_worker("pv/two", HANDLER, {"CONVEYOR_RETENTION": "1h"}, "--concurrency", "2")
    # Left runs until the gate opens: the flow holds still with Sink waiting for it alone
    during = wait_for("Left running, right completed",
                      lambda: (f := client.flow(flow.flow_id)) and f.counts.get("active") == 1
                      and f.counts.get("completed") == 2 and f, 120)
    assert states(during) == {"Left": ("active", None), "right": ("completed", None),
                              "root": ("completed", None), "Sink": ("waiting-children", 1)}
    assert as_ts(during) == ts_view(redis_url, flow.flow_id)

    gate.write_text("go")
    after = client.wait_flow(flow.flow_id, timeout=120)
    assert after is not None and after.counts == {"completed": 4}
    assert all(j.pending is None and j.reason is None for j in after.jobs)
    assert as_ts(after) == ts_view(redis_url, flow.flow_id)
    # narrowed to its pipeline (or one of its queues), or to another where it is not
    assert client.flow(flow.flow_id, "pv/one") == client.flow(flow.flow_id, "pv") == after
    assert client.flow(flow.flow_id, "elsewhere") is None
    assert ts_view(redis_url, flow.flow_id, "--pipeline", "elsewhere") is None


def test_a_dependent_cancelled_by_a_dead_parent_shows_why(
    client: Client, redis_url: str, start_worker: Any
) -> None:
    flow = client.enqueue_flow("pc", [
        {"key": "root", "queue": "pc/one", "data": {"failTimes": 5}, "attempts": 1},
        {"key": "kid", "queue": "pc/two", "data": 1, "parents": ["root"]},
        {"key": "grandkid", "queue": "pc/two", "data": 2, "parents": ["kid"]},
        {"key": "cont", "queue": "pc/two", "data": 3, "parents": ["root"], "on_parent_failure": "continue"},
        {"key": "ign", "queue": "pc/two", "data": 4, "parents": ["root", "kid"], "on_parent_failure": "ignore"},
    ])
    start_worker("pc/one", HANDLER)  # (none serves pc/two: the released jobs stay ready)
    # its dependents are told in the script that dead-letters it
    assert client.wait([flow.ids["root"]], timeout=120)[flow.ids["root"]].state == "dead"
    view = client.flow(flow.flow_id)
    assert view is not None
    assert states(view) == {"cont": ("ready", None), "grandkid": ("cancelled", None), "ign": ("ready", None),
                            "kid": ("cancelled", None), "root": ("dead", None)}
    reasons = {j.key: j.reason for j in view.jobs}
    assert reasons == {"cont": None, "grandkid": f"parent kid ({flow.ids['kid']}) was cancelled", "ign": None,
                       "kid": f"parent root ({flow.ids['root']}) is dead", "root": None}
    assert view.counts == {"ready": 2, "cancelled": 2, "dead": 1}
    assert as_ts(view) == ts_view(redis_url, flow.flow_id)


def test_an_unknown_flow_is_none_a_reclaimed_job_gone_and_bad_arguments_named(
    client: Client, redis_url: str
) -> None:
    assert client.flow("no-such-flow") is None
    assert ts_view(redis_url, "no-such-flow") is None
    flow = client.enqueue_flow("pg", [
        {"key": "a", "queue": "pg/q", "data": 1},
        {"key": "b", "queue": "pg/q", "data": 2, "parents": ["a"]},
    ])
    client.redis.delete(f"cvy:{{pg}}:job:{flow.ids['b']}")  # as a record reclaimed after its retention
    view = client.flow(flow.flow_id)
    assert view is not None and states(view) == {"a": ("ready", None), "b": ("gone", None)}
    assert view.jobs[1] == FlowJob("b", flow.ids["b"], "", "gone", [], "fail")
    assert as_ts(view) == ts_view(redis_url, flow.flow_id)
    for bad in ("bad id!", "", "x" * 201, None, 5):
        with pytest.raises(InvalidArgumentError, match="^flow_id: invalid job id"):
            client.flow(bad)  # type: ignore[arg-type]
    for pipeline in ("", "a b", "a/b/c", 7):
        with pytest.raises(InvalidArgumentError, match="^pipeline: invalid pipeline"):
            client.flow(flow.flow_id, pipeline)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="^flow_id"):
        client.wait_flow("no such")


def test_the_async_client_views_and_waits_for_a_flow(client: Client, redis_url: str, start_worker: Any) -> None:
    flow = client.enqueue_flow("pa", [
        {"key": "a", "queue": "pa/one", "data": {"result": 1}},
        {"key": "b", "queue": "pa/one", "data": {"result": 2}, "parents": ["a"]},
        {"key": "c", "queue": "pa/idle", "data": 3, "parents": ["b"]},  # no worker serves pa/idle
    ])

    async def main() -> Any:
        async with AsyncClient.from_url(redis_url) as c:
            first = await c.flow(flow.flow_id)
            assert first == client.flow(flow.flow_id)
            assert await c.flow("unknown") is None
            with pytest.raises(InvalidArgumentError, match="^flow_id"):
                await c.flow("bad id")
            start_worker("pa/one", HANDLER)
            await c.wait([flow.ids["a"], flow.ids["b"]], timeout=120)
            # c stays ready (no worker): the wait ends at its timeout
            started = time.monotonic()
            waited = await c.wait_flow(flow.flow_id, timeout=0.5)
            return first, waited, time.monotonic() - started

    first, waited, took = asyncio.run(main())
    assert states(first) == {"a": ("ready", None), "b": ("waiting-children", 1), "c": ("waiting-children", 1)}
    assert states(waited) == {"a": ("completed", None), "b": ("completed", None), "c": ("ready", None)}
    assert took >= 0.49
    assert as_ts(waited) == ts_view(redis_url, flow.flow_id)


def test_a_flow_on_a_redis_cluster(cluster_url: str, start_worker: Any) -> None:
    with Client.from_url(cluster_url) as c:
        c.redis.flushall()
        flow = c.enqueue_flow("pk", [
            {"key": "a", "queue": "pk/one", "data": {"result": "A"}},
            {"key": "b", "queue": "pk/one", "data": {"result": "B"}, "parents": ["a"]},
            {"key": "c", "queue": "pk/one", "data": {"result": "C"}, "parents": ["a"]},
            {"key": "d", "queue": "pk/one", "data": {"result": "D"}, "parents": ["b", "c"]},
        ])
        before = c.flow(flow.flow_id)
        assert before is not None and before.counts == {"ready": 1, "waiting-children": 3}
        assert as_ts(before) == ts_view(cluster_url, flow.flow_id)
        start_worker("pk/one", HANDLER, {"CONVEYOR_RETENTION": "1h"}, redis=cluster_url)
        after = c.wait_flow(flow.flow_id, timeout=120, pipeline="pk")
        assert after is not None and after.counts == {"completed": 4}
        assert as_ts(after) == ts_view(cluster_url, flow.flow_id)
        assert c.flow("unknown") is None

    async def main() -> Any:
        async with AsyncClient.from_url(cluster_url) as a:
            return await a.flow(flow.flow_id)

    assert asyncio.run(main()) == after


def test_the_kit_reads_a_large_parent_result_by_reference(client: Client, start_worker: Any) -> None:
    flow = client.enqueue_flow("pr", [
        {"key": "big", "queue": "pr/one", "data": "big"},
        {"key": "small", "queue": "pr/one", "data": "small"},
        {"key": "sink", "queue": "pr/one", "data": "sink", "parents": ["big", "small"]},
    ])
    start_worker("pr/one", "python:tests.stdio_handlers:flow_results")
    sink = client.wait([flow.ids["sink"]], timeout=120)[flow.ids["sink"]]
    assert sink.state == "completed", sink
    big = "b" * 5000
    assert sink.result["big"] == big and sink.result["small"] == {"n": 1}
    # the large one came by reference, the small one inline
    assert sink.result["parents"] == {
        "big": {"id": flow.ids["big"], "ref": f"{flow.flow_id}:big", "bytes": len(json.dumps(big))},
        "small": {"id": flow.ids["small"], "result": {"n": 1}},
    }


def _records(r: Any, pipeline: str, ids: Dict[str, str]) -> Dict[str, Dict[str, Any]]:
    """Each job's record by key, what differs between two submissions of one flow left out."""
    out = {}
    for key, job_id in ids.items():
        rec = r.hgetall(PipelineKeys(pipeline).job(job_id))
        for f in ("createdAt", "flow", "score", "dependents"):
            rec.pop(f, None)
        out[key] = rec
    return out


def test_flow_job_options_are_sent_as_the_typescript_producer_sends_them(client: Client, redis_url: str, r: Any) -> None:
    """delay, uses, notify (and the others) on a root and on a waiting job: the same records from
    both clients; the delayed root in `delayed`, the implicit group of a job with uses."""
    notify = {"url": "https://hooks.example/f", "events": ["completed", "cancelled"]}

    def jobs(q: str, py: bool) -> Any:
        return [
            {"key": "root", "queue": q, "data": 1, ("delay" if py else "delayMs"): 60 if py else 60_000, "priority": 3,
             "notify": notify},
            {"key": "kid", "queue": q, "data": 2, "parents": ["root"], "uses": {"llm": {"tokens": 5}},
             ("delay" if py else "delayMs"): 1.5 if py else 1500, ("timeout" if py else "timeoutMs"): 30 if py else 30_000,
             "task": "t1", "attempts": 2, "notify": notify},
            {"key": "grp", "queue": q, "data": 3, "parents": ["root"], "group": "acme", "uses": {"llm": {"tokens": 1}},
             ("on_parent_failure" if py else "onParentFailure"): "continue"},
        ]

    py = client.enqueue_flow("po", jobs("po/q", True))
    tsf = ts("enqueue-flow", redis_url, "pt", json.dumps(jobs("pt/q", False)))
    assert py.created and tsf["created"]
    assert _records(r, "po", py.ids) == {k: {**v, "queue": v["queue"].replace("pt/", "po/")}
                                         for k, v in _records(r, "pt", tsf["ids"]).items()}
    assert r.zscore(QueueKeys("po/q").delayed, py.ids["root"]) is not None  # delayed at enqueue
    kid = r.hgetall(PipelineKeys("po").job(py.ids["kid"]))
    assert (kid["state"], kid["group"], kid["delayMs"]) == ("waiting-children", "~res:llm", "1500")


def test_a_flow_idempotency_key_returns_the_first_submission_sync_and_async(client: Client, redis_url: str, r: Any) -> None:
    jobs = [{"key": "a", "queue": "pi/q", "data": 1}, {"key": "b", "queue": "pi/q", "data": 2, "parents": ["a"]}]
    first = client.enqueue_flow("pi", jobs, idempotency_key="order-1")
    assert first.created
    written = r.xlen(PipelineKeys("pi").outbox)

    async def again() -> FlowResult:
        async with AsyncClient.from_url(redis_url) as c:
            return await c.enqueue_flow("pi", list(reversed(jobs)), idempotency_key="order-1")

    assert asyncio.run(again()) == FlowResult(first.flow_id, first.ids, False)
    assert client.enqueue_flow("pi", jobs, idempotency_key="order-1") == FlowResult(first.flow_id, first.ids, False)
    assert r.xlen(PipelineKeys("pi").outbox) == written  # nothing written
    # the TypeScript producer sees the same key the same way
    assert ts("enqueue-flow", redis_url, "pi", json.dumps(jobs), json.dumps({"idempotencyKey": "order-1"})) == {
        "flowId": first.flow_id, "ids": first.ids, "created": False}
    with pytest.raises(InvalidFlowError, match="idempotency_key must be a string of 1..200"):
        client.enqueue_flow("pi", jobs, idempotency_key="")


@pytest.mark.parametrize("option,message", [
    ("dedupe", "dedupe is not supported in a flow: a debounced or throttled job"),
    ("idempotency_key", "idempotency_key is not supported on a flow job: give the flow one"),
])
def test_flow_job_options_without_a_meaning_in_a_flow_are_refused_with_the_reason(
        client: Client, option: str, message: str) -> None:
    with pytest.raises(InvalidFlowError, match=message):
        client.enqueue_flow("pz", [{"key": "a", "queue": "pz/q", "data": 1, option: {"key": "k"}}])


def test_parent_result_without_a_worker_inline_results_and_clear_errors() -> None:
    from conveyor.handler import Context, ParentResultError

    ctx = Context(None, None, parents={"a": {"id": "j1", "result": [1]}, "d": {"id": "j2", "error": "boom"},
                                       "big": {"id": "j3", "ref": "f1:big", "bytes": 5000}})
    assert ctx.parent_result("a") == [1]
    with pytest.raises(ParentResultError, match="parent d \\(j2\\) ended without a result: boom"):
        ctx.parent_result("d")
    with pytest.raises(ParentResultError, match='no parent "zz"'):
        ctx.parent_result("zz")
    with pytest.raises(ParentResultError, match="by reference and this job has no worker callback"):
        ctx.parent_result("big")
