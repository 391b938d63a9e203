"""Resources from Python (docs/budgets.md): `enqueue(..., uses=...)` writes what the TypeScript
producer writes, and a Python handler (the HTTP sidecar and the command contract) under the real
TypeScript worker gets its granted key (ctx.resources), reports usage that corrects the key's
window (ctx.usage) and, raising RateLimited, benches the key for every worker while the job goes
back without spending an attempt."""

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from conftest import cli, ts, wait_for
from conveyor import InvalidJobError
from test_handlers import HANDLERS, finished, handler_spec, sidecar  # noqa: F401 (the http kind's fixture)
from test_protocol import snapshot


def test_enqueue_with_uses_writes_what_the_typescript_producer_writes(redis_url: str, r: redis.Redis, client: Any) -> None:
    jobs = [
        {"id": "u1", "data": {"n": 1}, "uses": {"openai": {"tokens": 1200}}},
        {"id": "u2", "data": {"n": 2}},
        {"id": "u3", "data": {"n": 3}, "group": "acme", "uses": {"openai": {}, "ocr": {"pages": 3}}},
    ]
    ts("enqueue", redis_url, "llm/chat", json.dumps(jobs))
    expected = snapshot(r)
    assert expected["cvy:{llm}:job:u1"][1]["uses"] == '{"openai":{"tokens":1200}}'
    assert expected["cvy:{llm}:q:llm/chat:gwaiting"][1] == {"": "2", "~res:openai": "1", "acme": "1"}
    r.flushall()
    client.enqueue_many("llm/chat", jobs)
    assert snapshot(r) == expected
    with pytest.raises(InvalidJobError, match=r"uses\.openai\.tokens must be an integer"):
        client.enqueue("llm/chat", 1, uses={"openai": {"tokens": -1}})
    with pytest.raises(InvalidJobError, match=r"uses: resource 'bad name' is invalid"):
        client.enqueue("llm/chat", 1, uses={"bad name": {}})


@pytest.mark.parametrize("kind", HANDLERS)
def test_python_handler_gets_its_key_reports_usage_and_benches_a_key(
    kind: str, request: Any, client: Any, start_worker: Any, redis_url: str, tmp_path: Path
) -> None:
    q = f"budget{kind}/chat"
    made = cli(redis_url, "resource", "set", "llm", "--key", "k1", "--limit", "tokens=10000/m",
               "--key", "k2", "--limit", "tokens=10000/m", "--ceiling", "1", "--pipeline", q)
    assert made.returncode == 0, made.stderr
    start_worker(q, handler_spec(kind, request))
    marker = str(tmp_path / "limited")
    ids = [
        client.enqueue(q, {"mode": "budget", "used": 100, "limit_key": "k1", "marker": marker},
                       uses={"llm": {"tokens": 1000}}, attempts=1)
        for _ in range(6)
    ]
    jobs = [finished(client, i) for i in ids]
    assert all(j.state == "completed" for j in jobs), [j.error for j in jobs]
    assert all(j.result["attempt"] == 1 for j in jobs)  # the rate-limited one too: no attempt spent
    assert Path(marker).exists()
    assert client.counters(q).get("rateLimited") == 1
    listed = json.loads(cli(redis_url, "resource", "list", "--pipeline", q, "--json").stdout)[0]
    keys = {k["id"]: k for k in listed["keys"]}
    assert keys["k1"]["benchedUntil"], "k1 benched for every worker"
    # each job reported 100 of its 1,000 estimate before it completed: the window counts 100
    on_k2 = [j.result["key"] for j in jobs].count("k2")
    assert on_k2 >= 5
    assert keys["k2"]["limits"][0]["used"] == 100 * on_k2


def test_stats_counts_jobs_waiting_for_budget_apart_from_ready(
    request: Any, client: Any, start_worker: Any, redis_url: str
) -> None:
    q = "budgetstats/chat"
    made = cli(redis_url, "resource", "set", "llm", "--key", "k1", "--limit", "requests=1/h", "--ceiling", "1",
               "--pipeline", q)
    assert made.returncode == 0, made.stderr
    start_worker(q, handler_spec("command", request))
    ids = [client.enqueue(q, {"mode": "ok", "steps": 1}, uses={"llm": {}}) for _ in range(3)]
    client.enqueue(q, {"mode": "ok", "steps": 1})  # needs nothing: not held up
    wait_for("one budgeted job and the free one done", lambda: client.stats(q)["completed"] == 2)
    stats = wait_for("the others counted as waiting for budget",
                     lambda: (s := client.stats(q)) and s["waitingForBudget"] == 2 and s)
    assert stats["ready"] == 0 and stats["backlog"] == 0, stats
    assert sum(1 for i in ids if client.get_job(i).state == "ready") == 2
