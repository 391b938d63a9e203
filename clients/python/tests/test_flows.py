"""Client.enqueue_flow against a real Redis and real workers: a diamond (a → b, c → d) across
two stages runs in order and can be waited for; bad graphs are refused naming the problem."""
from typing import Any

import pytest

from conveyor import Client, FlowResult, InvalidFlowError


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
    ([{"key": "a", "queue": "px/q", "data": 1, "delay": 5}], "delay is not supported in a flow"),
    ([{"key": "a", "queue": "px/q", "data": 1}, {"key": "a", "queue": "px/q", "data": 2}], "flow job a: duplicate key"),
])
def test_a_bad_flow_is_refused_naming_the_problem(client: Client, jobs: Any, message: str) -> None:
    with pytest.raises(InvalidFlowError, match=message.replace("(", r"\(")):
        client.enqueue_flow("px", jobs)
    assert client.redis.keys("*{px}*") == []
