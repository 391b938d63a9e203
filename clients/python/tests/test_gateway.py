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


def test_a_record_leaves_out_what_it_does_not_have_and_a_named_reply_is_read_by_name():
    from conveyor import _gateway
    from conveyor._keys import QueueKeys

    script = _gateway.schedule_tick(QueueKeys("p/q"), "nightly", now=5, version="", tick=10)
    assert script.args == ['{"jobPrefix":"cvy:{p}:job:","queue":"p/q","now":5,"name":"nightly","tick":10}']
    assert _gateway.cancel_reply(["outcome", "notFound", "jobsCancelled", 0]) == ("notFound", "", "", 0)
    assert _gateway.cancel_reply(["outcome", "cancelled", "state", "ready", "queue", "p/q", "jobsCancelled", 1]) == (
        "cancelled", "ready", "p/q", 1)
