"""examples/org-extract end to end: each stage's contract set with `conveyor contract set`, one
real `conveyor worker` per stage running the example's Python handlers, the producer script.
The extract stage's first answer breaks its result contract; the retry repairs it from
job.previous_errors; a text the model cannot repair ends dead with its errors and rejected
result kept; data that breaks the data contract is refused at enqueue."""

import json
import os
import subprocess
from typing import Any

import pytest

from conftest import PACKAGE, PYTHON, REPO, cli

EXAMPLE = REPO / "examples" / "org-extract"


@pytest.fixture()
def stages(redis_url: str, r: Any, start_worker: Any) -> Any:
    for stage in ("extract", "enrich"):
        done = cli(redis_url, "contract", "set", f"orgs/{stage}", "--file", str(EXAMPLE / stage / "contract.json"))
        assert done.returncode == 0, done.stdout + done.stderr
    env = {"PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(PACKAGE)])}
    extract = start_worker("orgs/extract", "python:handlers:extract", env, "--next-queue", "orgs/enrich",
                           "--concurrency", "4")
    enrich = start_worker("orgs/enrich", "python:handlers:enrich", env, "--concurrency", "4")
    return extract, enrich


def test_org_extract_repairs_from_previous_errors(stages: Any, redis_url: str, client: Any) -> None:
    run = subprocess.run(
        [PYTHON, str(EXAMPLE / "enqueue.py"), redis_url], capture_output=True, text=True, timeout=180,
        cwd=str(EXAMPLE), env={**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE), str(PACKAGE)])},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "enqueued 3 into orgs/extract" in run.stdout

    # Invalid first answer, repaired on the second attempt, then enriched.
    for key, slug, days in [("riverside-food-bank", "riverside-food-bank", ["mon", "wed", "fri"]),
                            ("hillside-legal-clinic", "hillside-legal-clinic", ["tue", "thu", "sat"])]:
        assert f"{key}: completed (attempts: orgs/extract 2, orgs/enrich 1)" in run.stdout, run.stdout
        job = client.get_job(key, "orgs/extract")
        assert job.state == "completed" and job.queue == "orgs/enrich"
        assert job.result["slug"] == slug and job.result["open_days"] == days
        assert job.result["organization"]["contacts"], job.result
        lines = [line.message for line in client.job_logs(key, "orgs/extract")]
        assert any("attempt 2: repairing from 1 previous error(s): /contacts: is required (required)" in m
                   for m in lines), lines

    # No contact in the text: every answer breaks the contract; dead after 3 attempts.
    assert "corner-notice: dead" in run.stdout, run.stdout
    dead = client.get_job("corner-notice", "orgs/extract")
    assert dead.state == "dead" and dead.queue == "orgs/extract"
    errors = json.loads(dead.raw["errors"])
    assert [e["attempt"] for e in errors] == [1, 2, 3]
    assert {e["kind"] for e in errors} == {"invalid-result"}
    assert errors[0]["message"].startswith("result breaks the contract: /contacts: is required")
    assert {"pointer": "/contacts", "rule": "minItems"}.items() <= errors[-1]["details"][0].items()
    assert json.loads(dead.raw["rejected"])["contacts"] == []


def test_org_extract_refuses_bad_data_at_enqueue(stages: Any, client: Any, r: Any) -> None:
    from conveyor.client import ContractViolation

    def member(o: Any, k: str) -> Any:  # the violations' shape: mappings or attributes
        return o[k] if isinstance(o, dict) else getattr(o, k)

    def jobs() -> list[Any]:  # (the workers write their own keys meanwhile: count job records only)
        return sorted(r.scan_iter(match="cvy:{orgs}:job:*"))

    before = jobs()
    with pytest.raises(ContractViolation) as refused:
        client.enqueue_many("orgs/extract", [{"data": {"text": "Ok Org\nfine"}}, {"data": {"txt": "typo"}}])
    [job] = refused.value.jobs
    assert member(job, "index") == 1 and member(job, "side") == "data"
    pointers = {member(v, "pointer"): member(v, "rule") for v in member(job, "violations")}
    assert pointers.get("/text") == "required" and "additionalProperties" in pointers.values(), pointers
    assert jobs() == before  # nothing of the batch written
