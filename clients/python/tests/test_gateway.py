"""One gateway: every script call of the Python client is built in conveyor/_gateway.py (KEYS and
ARGV in one place per script), as queue/gateway.ts does for TypeScript."""

import pathlib
import re

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "conveyor"


def test_no_module_but_the_gateway_builds_a_script_call():
    offenders = [
        p.name
        for p in sorted(PACKAGE.glob("*.py"))
        if p.name != "_gateway.py" and re.search(r"\bScript\(\s*\"", p.read_text())
    ]
    assert offenders == [], f"these build KEYS/ARGV themselves: {offenders}"
