"""A queue's contract (JSON Schemas of its jobs' data and results, per task; queue/contracts.ts)
checked at enqueue as the TypeScript producer checks it. `jsonschema` is imported only when a
queue has a contract: a client of queues without one does not need it."""

import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

#: A task's name (queue/contracts.ts TASK_NAME_PATTERN).
TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_VALUE_CUT = 80
_DRAFT_07 = re.compile(r"^https?://json-schema\.org/draft-07/schema#?$")
_CHANGED = re.compile(r"ERR_CONTRACT_CHANGED ?(\S*)")


class ContractUnavailable(RuntimeError):
    """The queue has a contract but the `jsonschema` package, which checks it, is not installed."""


def contract_changed(err: Exception) -> Optional[str]:
    """The hash in force ('' = none) when `err` is enqueue_jobs' ERR_CONTRACT_CHANGED, else None."""
    m = _CHANGED.search(str(err))
    return m.group(1) if m else None


def _cut(text: str) -> str:
    return text if len(text) <= _VALUE_CUT else text[: _VALUE_CUT - 1] + "…"


def _pointer(path: Sequence[Any]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


class CompiledContract:
    """A contract with a validator per schema (Draft 2020-12, or draft-07 by its $schema; formats checked)."""

    def __init__(self, hash_: str, contract: Mapping[str, Any]) -> None:
        try:
            import jsonschema
        except ImportError:  # pragma: no cover - depends on the environment
            raise ContractUnavailable(
                "this queue has a contract: install the jsonschema package to enqueue into it "
                "(pip install jsonschema, or python3-jsonschema)"
            ) from None
        self.hash = hash_
        self.contract = contract
        self.tasks: Optional[List[str]] = list(contract["tasks"]) if isinstance(contract.get("tasks"), Mapping) else None
        self._validators: Dict[str, Any] = {}
        checker = jsonschema.FormatChecker()

        def add(key: str, schema: Any) -> None:
            if schema is None:
                return
            draft07 = isinstance(schema, Mapping) and _DRAFT_07.match(str(schema.get("$schema", "")))
            cls = jsonschema.Draft7Validator if draft07 else jsonschema.Draft202012Validator
            self._validators[key] = cls(schema, format_checker=checker)

        add("data", contract.get("data"))
        add("result", contract.get("result"))
        for name, t in (contract.get("tasks") or {}).items():
            add(f"data:{name}", (t or {}).get("data"))
            add(f"result:{name}", (t or {}).get("result"))

    def check_data(self, data: Any, task: Optional[str]) -> List[Dict[str, Any]]:
        """How `data` breaks its task's data schema (or the stage's): Violation dicts, [] when it keeps it."""
        if task is not None and self.tasks is not None and task not in self.tasks:
            return [{
                "pointer": "",
                "rule": "task",
                "message": f"unknown task '{task}' (the stage's tasks: {', '.join(self.tasks) or 'none'})",
                "value": json.dumps(task),
            }]
        v = self._validators.get(f"data:{task}" if task is not None and self.tasks is not None else "data")
        if v is None:
            return []
        out: List[Dict[str, Any]] = []
        seen = set()
        for e in v.iter_errors(data):
            if e.validator == "required":
                # (one error per missing property, none saying which: each missing one named once)
                for missing in e.validator_value:
                    pointer = _pointer(list(e.absolute_path) + [missing])
                    if isinstance(e.instance, dict) and missing not in e.instance and pointer not in seen:
                        seen.add(pointer)
                        out.append({"pointer": pointer, "rule": "required", "message": "is required"})
                continue
            out.append({"pointer": _pointer(e.absolute_path), "rule": str(e.validator), "message": e.message,
                        "value": _cut(json.dumps(e.instance, ensure_ascii=False))})
        return out


def job_violations(
    contract: Optional[CompiledContract],
    jobs: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    start: int = 0,
) -> List[Dict[str, Any]]:
    """Each job from `start` on whose data breaks `contract`: {index, id?, task?, side, violations}
    as the TypeScript producer reports them; the data checked as its JSON text parses."""
    if contract is None:
        return []
    bad = []
    for i in range(start, len(jobs)):
        task = jobs[i].get("task")
        violations = contract.check_data(json.loads(records[i]["data"]), task)
        if violations:
            entry: Dict[str, Any] = {"index": i}
            if jobs[i].get("id") is not None:
                entry["id"] = jobs[i]["id"]
            if task is not None:
                entry["task"] = task
            entry.update(side="data", violations=violations)
            bad.append(entry)
    return bad


def describe(jobs: Sequence[Mapping[str, Any]]) -> str:
    """One clause per bad job: `job 1 (id b1) data: /email: is required (required)`."""
    parts = []
    for j in jobs:
        who = f"job {j['index']}" + (f" (id {j['id']})" if "id" in j else "") + (f" task {j['task']}" if "task" in j else "")
        what = ", ".join(
            f"{v['pointer'] or '(the whole value)'}: {v['message']} ({v['rule']}"
            + (f", value {v['value']}" if "value" in v else "") + ")"
            for v in j["violations"]
        )
        parts.append(f"{who} {j['side']}: {what}")
    return "; ".join(parts)
