"""The handler kit's serve() as a process: after SIGTERM it releases its port at once (a
restarted sidecar binds it) while it finishes the job it is running."""

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict

from conftest import PACKAGE, PYTHON, free_port, wait_for
from conveyor.handler import make_server

SIDECAR = """
import os, sys, time
from conveyor.handler import serve

def handle(job, ctx):
    open(os.environ["STARTED"], "w").close()
    while not os.path.exists(os.environ["RELEASE"]):
        time.sleep(0.02)
    return {"finished": True}

serve(handle, port=int(sys.argv[1]), idle_exit=0.5)
"""


def _bind(port: int) -> bool:
    """A new sidecar on the port, as a restarted one starts (then closed again)."""
    try:
        server = make_server(lambda job, ctx: None, port)
    except OSError:
        return False
    server.server_close()
    return True


def test_serve_releases_its_port_at_sigterm_and_finishes_its_running_job(tmp_path: Path) -> None:
    port = free_port()
    started, release = tmp_path / "started", tmp_path / "release"
    proc = subprocess.Popen(
        [PYTHON, "-c", SIDECAR, str(port)],
        env={**os.environ, "PYTHONPATH": str(PACKAGE), "STARTED": str(started), "RELEASE": str(release)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        wait_for("sidecar up", lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).status == 200)
        answer: Dict[str, Any] = {}

        def post() -> None:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/run", data=b"{}", method="POST")
            with urllib.request.urlopen(req, timeout=60) as res:
                answer.update(status=res.status, body=json.loads(res.read()))

        thread = threading.Thread(target=post)
        thread.start()
        wait_for("the job running", started.exists)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        # the job is still running, and the port is free for the next sidecar already
        wait_for("the port free", lambda: _bind(port), timeout=10)
        freed = time.monotonic() - signalled
        assert proc.poll() is None and not answer
        release.touch()
        thread.join(60)
        assert answer == {"status": 200, "body": {"finished": True}}
        assert proc.wait(30) == 0
        print(f"port free {freed:.2f} s after SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
