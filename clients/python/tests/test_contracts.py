"""Contracts at enqueue in the Python client (docs/protocol.md, "Enqueueing from another
language"): a queue's contract, set with `conveyor contract set`, is checked before anything is
written; every bad job is named with its pointers (ContractViolation.jobs, the TypeScript
producer's shape); a contract set or changed under the client's cache is caught by the enqueue
script and applied; a queue without one needs no jsonschema. Real Redis, the real CLI."""

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import PACKAGE, PYTHON, cli, ts
from conveyor import Client, ContractChangedError, ContractViolation, InvalidJobError
from conveyor.aio import AsyncClient

PERSON = {
    "data": {
        "type": "object",
        "required": ["name", "email"],
        "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
    }
}


def set_contract(url: str, queue: str, contract: Any, tmp_path: Path) -> str:
    path = tmp_path / f"contract-{abs(hash(json.dumps(contract, sort_keys=True)))}.json"
    path.write_text(json.dumps(contract))
    out = cli(url, "contract", "set", queue, "--file", str(path), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["hash"]


def test_bad_data_is_refused_before_anything_is_written(redis_url: str, r: Any, client: Client, tmp_path: Path) -> None:
    h = set_contract(redis_url, "people", PERSON, tmp_path)
    with pytest.raises(ContractViolation) as refused:
        client.enqueue_many("people", [
            {"data": {"name": "a", "email": "a@example.com"}},
            {"data": {"name": "b"}, "id": "b1"},
            {"data": {"name": 3, "email": "not an email"}},
        ])
    err = refused.value
    assert isinstance(err, InvalidJobError)
    assert err.hash == h
    assert [(j["index"], j.get("id"), j["side"], sorted(f"{v['pointer']} {v['rule']}" for v in j["violations"]))
            for j in err.jobs] == [
        (1, "b1", "data", ["/email required"]),
        (2, None, "data", ["/email format", "/name type"]),
    ]
    email = next(v for v in err.jobs[1]["violations"] if v["rule"] == "format")
    assert email["value"] == '"not an email"'
    assert "job 1 (id b1) data: /email: is required (required)" in str(err)
    assert r.hget("cvy:{people}:q:people:counts", "enqueued") is None
    assert r.exists("cvy:{people}:job:b1") == 0
    assert client.enqueue("people", {"name": "c", "email": "c@example.com"})


def test_a_contract_set_or_changed_under_the_cache_is_caught_and_applied(
    redis_url: str, r: Any, client: Client, tmp_path: Path
) -> None:
    client.enqueue("typed", {"anything": True})  # cached: no contract
    set_contract(redis_url, "typed", PERSON, tmp_path)
    with pytest.raises(ContractViolation):
        client.enqueue("typed", {"anything": True})
    client.enqueue("typed", {"name": "a", "email": "a@example.com"})
    set_contract(redis_url, "typed", {"data": {"type": "object", "required": ["id"]}}, tmp_path)
    with pytest.raises(ContractViolation) as refused:
        client.enqueue("typed", {"name": "a", "email": "a@example.com"})
    assert refused.value.jobs[0]["violations"] == [{"pointer": "/id", "rule": "required", "message": "is required"}]
    client.enqueue("typed", {"id": 7})
    assert cli(redis_url, "contract", "delete", "typed").returncode == 0
    client.enqueue("typed", "free")  # the cached contract refused it; the one in force (none) does not
    assert r.hget("cvy:{typed}:q:typed:counts", "enqueued") == "4"


def test_tasks_are_stored_and_checked_an_unknown_one_refused(
    redis_url: str, r: Any, client: Client, tmp_path: Path
) -> None:
    set_contract(redis_url, "docs", {"tasks": {
        "summarize": {"data": {"type": "object", "required": ["text"]}},
        "classify": {"data": {"type": "object", "required": ["labels"]}},
    }}, tmp_path)
    job_id = client.enqueue("docs", {"text": "t"}, task="summarize")
    assert r.hget(f"cvy:{{docs}}:job:{job_id}", "task") == "summarize"
    with pytest.raises(ContractViolation) as refused:
        client.enqueue_many("docs", [{"data": {"text": "t"}, "task": "classify"},
                                     {"data": {"text": "t"}, "task": "translate"}])
    assert [(j["index"], j["task"], [(v["pointer"], v["rule"]) for v in j["violations"]]) for j in refused.value.jobs] == [
        (0, "classify", [("/labels", "required")]),
        (1, "translate", [("", "task")]),
    ]
    assert "unknown task 'translate' (the stage's tasks: summarize, classify)" in str(refused.value)
    for bad in ("", "a b", "-x", "x" * 101, 7):
        with pytest.raises(InvalidJobError, match="task must be"):
            client.enqueue("docs", {"text": "t"}, task=bad)  # type: ignore[arg-type]
    # A job the TypeScript producer enqueues with a task reads back the same.
    [made] = ts("enqueue", redis_url, "docs", json.dumps([{"data": {"text": "u"}, "task": "summarize", "id": "t1"}]))
    assert made["created"] and r.hget("cvy:{docs}:job:t1", "task") == "summarize"
    assert r.hget("cvy:{docs}:q:docs:counts", "enqueued") == "2"


def test_the_async_client_checks_alike(redis_url: str, r: Any, tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncClient.from_url(redis_url) as c:
            await c.enqueue("async", 1)
            set_contract(redis_url, "async", PERSON, tmp_path)
            with pytest.raises(ContractViolation) as refused:
                await c.enqueue_many("async", [{"data": {"name": "a"}, "id": "x1"}])
            assert refused.value.jobs[0]["violations"][0]["pointer"] == "/email"
            await c.enqueue("async", {"name": "a", "email": "a@example.com"}, task="any")

    asyncio.run(main())
    assert r.hget("cvy:{async}:q:async:counts", "enqueued") == "2"


def test_a_contract_that_keeps_changing_is_reported(redis_url: str, r: Any, client: Client, tmp_path: Path) -> None:
    set_contract(redis_url, "racing", {"data": {"type": "integer"}}, tmp_path)
    # Every read of the contract is followed by another change before the enqueue runs.
    n = [0]
    store = client._contracts.store  # (each read of the contract ends here)

    def read_then_change(queue: str, stored: Any) -> Any:
        got = store(queue, stored)
        n[0] += 1
        set_contract(redis_url, "racing", {"data": {"type": "integer", "minimum": -n[0]}}, tmp_path)
        return got

    client._contracts.store = read_then_change  # type: ignore[method-assign]
    with pytest.raises(ContractChangedError, match="changed again"):
        client.enqueue("racing", 5)
    assert r.hget("cvy:{racing}:q:racing:counts", "enqueued") is None


def test_without_jsonschema_a_queue_without_a_contract_works(redis_url: str, r: Any, tmp_path: Path) -> None:
    set_contract(redis_url, "strict", PERSON, tmp_path)
    program = (
        "import sys; sys.modules['jsonschema'] = None\n"  # (an import of it fails)
        f"sys.path.insert(0, {str(PACKAGE)!r})\n"
        "from conveyor import Client\n"
        f"c = Client.from_url({redis_url!r})\n"
        "print(c.enqueue('plain', {'x': 1}, task='t'))\n"
        "try:\n"
        "    c.enqueue('strict', {'x': 1})\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, err)\n"
    )
    out = subprocess.run([PYTHON, "-c", program], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    job_id, refusal = out.stdout.strip().split("\n")
    assert r.hget(f"cvy:{{plain}}:job:{job_id}", "task") == "t"
    assert refusal.startswith("ContractUnavailable this queue has a contract: install the jsonschema package")
    assert r.hget("cvy:{strict}:q:strict:counts", "enqueued") is None


def test_contracts_on_a_cluster(cluster_url: str, tmp_path: Path) -> None:
    with Client.from_url(cluster_url) as c:
        c.enqueue("p9/typed", {"anything": True})
        set_contract(cluster_url, "p9/typed", PERSON, tmp_path)
        with pytest.raises(ContractViolation) as refused:
            c.enqueue_many("p9/typed", [{"data": {"name": "a"}}, {"data": {"name": "b", "email": "b@example.com"}}])
        assert [j["index"] for j in refused.value.jobs] == [0]
        assert c.enqueue("p9/typed", {"name": "b", "email": "b@example.com"}, task="x")

