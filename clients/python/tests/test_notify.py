"""A job's own `notify=` (docs/notifications.md): checked at enqueue, kept on the record, and sent
by a real worker, signed with the pool's secret, to a receiver in this process."""

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, List, Tuple

import pytest

from conftest import REPO, wait_for
from conveyor import Client, InvalidJobError

SECRET = "whsec_python_0123456789"


def verify(secret: str, header: str, raw_body: bytes) -> bool:
    parts = dict(p.split("=", 1) for p in (header or "").split(",") if "=" in p)
    expected = hmac.new(secret.encode(), f"{parts.get('t')}.".encode() + raw_body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("v1", ""))


@pytest.mark.parametrize(
    "notify, message",
    [
        ("https://x", "notify must be a mapping"),
        ({"url": "ftp://x"}, "notify.url must be an http:// or https:// URL"),
        ({"url": "https://x", "events": ["done"]}, "notify.events must be a non-empty list of completed, dead, cancelled"),
        ({"url": "https://x", "events": []}, "notify.events must be a non-empty list"),
        ({"url": "https://x", "secret": "s"}, "notify takes url and events only"),
    ],
)
def test_bad_notify_is_refused_before_redis(client: Client, r: Any, notify: Any, message: str) -> None:
    with pytest.raises(InvalidJobError, match=message):
        client.enqueue("mail", {}, notify=notify)
    assert r.keys("*") == []


def test_notify_reaches_the_record_and_the_receiver(client: Client, start_worker: Any, tmp_path: Path) -> None:
    received: List[Tuple[str, bytes]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.headers["Conveyor-Signature"], body))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/done"
        job_id = client.enqueue("pynotify/s", {"result": {"n": 1}}, notify={"url": url, "events": ["completed"]})
        assert client.get_job(job_id).raw["notify"] == f"completed {url}"
        secret = tmp_path / "secret"
        secret.write_text(SECRET)
        handler = f"module:{REPO / 'test' / 'fixtures' / 'recordingHandler.js'}"
        start_worker("pynotify/s", handler, None, "--notify-secret-file", str(secret), "--notify-allow", "127.0.0.1/32")
        wait_for("the notification", lambda: received)
        signature, body = received[0]
        assert verify(SECRET, signature, body)
        assert not verify("another-secret-0123", signature, body)
        sent = json.loads(body)
        assert (sent["id"], sent["state"], sent["result"], sent["queue"]) == (job_id, "completed", {"n": 1}, "pynotify/s")
    finally:
        server.shutdown()
