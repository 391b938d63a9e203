"""Real components for the Python client's tests: a throwaway redis-server per session (flushed
per test), the repository's TypeScript producer and admin (ts_side.ts) and real `conveyor worker`
processes. No mocks."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
import redis

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
REPO = PACKAGE.parent.parent
NODE = str(REPO / "node_modules" / ".bin" / "node")
CONVEYOR = str(REPO / "bin" / "conveyor.js")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

sys.path.insert(0, str(PACKAGE))  # the package from this checkout (the install test covers pip)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port(cluster_node: bool = False) -> int:
    """A free loopback port; for a cluster node also its bus port (port + 10000) must be free."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not cluster_node or (port + 10000 < 65536 and _bindable(port + 10000)):
            return port


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0, every: float = 0.05) -> Any:
    """Poll until check() returns something truthy (generous: the test box is loaded)."""
    deadline = time.monotonic() + timeout
    last: Optional[BaseException] = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as err:  # noqa: BLE001 - retried until the deadline
            last = err
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}" + (f": {last!r}" if last else ""))


@pytest.fixture(scope="session")
def tmp_root() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="cvy-py-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start_redis(dir: Path, extra: List[str] = ()) -> "subprocess.Popen[bytes]":
    """A redis-server on a free port; another process may take the port first: then another."""
    for _ in range(5):
        port = free_port(cluster_node="--cluster-enabled" in extra)
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(dir),
             "--daemonize", "no", *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        proc.port = port  # type: ignore[attr-defined]

        def up() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"redis-server exited {proc.returncode}")
            return bool(redis.Redis(host="127.0.0.1", port=port).ping())

        try:
            wait_for(f"redis on {port}", up, 20)
            return proc
        except AssertionError:
            proc.kill()
            proc.wait(10)
    raise AssertionError("could not start redis-server")


@pytest.fixture(scope="session")
def redis_url(tmp_root: Path) -> Iterator[str]:
    d = tmp_root / "redis"
    d.mkdir()
    proc = start_redis(d)
    yield f"redis://127.0.0.1:{proc.port}"  # type: ignore[attr-defined]
    proc.terminate()
    proc.wait(10)


@pytest.fixture()
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture()
def client(redis_url: str, r: redis.Redis) -> Iterator[Any]:
    from conveyor import Client

    c = Client.from_url(redis_url)
    yield c
    c.close()


def node(*args: str, timeout: float = 60) -> str:
    out = subprocess.run([NODE, *args], capture_output=True, text=True, timeout=timeout, cwd=str(REPO))
    if out.returncode != 0:
        raise AssertionError(f"node {' '.join(args)} exited {out.returncode}: {out.stderr}")
    return out.stdout


def ts(command: str, url: str, *args: str) -> Any:
    """The TypeScript producer/admin (clients/python/tests/ts_side.ts)."""
    return json.loads(node(str(HERE / "ts_side.ts"), command, url, *args))


def cli(url: str, *args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([NODE, CONVEYOR, *args, "--redis", url], capture_output=True, text=True, timeout=60,
                          cwd=str(REPO))


class Worker:
    def __init__(self, proc: "subprocess.Popen[bytes]", port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture()
def start_worker(redis_url: str, tmp_root: Path) -> Iterator[Callable[..., Worker]]:
    """Real `conveyor worker` processes, stopped (SIGTERM, warm) after the test."""
    started: List[Worker] = []

    def start(
        queue: str, handler: str, env: Optional[Dict[str, str]] = None, *args: str, redis: Optional[str] = None
    ) -> Worker:
        # A free port can be taken (by any outgoing connection's local port) before the worker binds it:
        # a worker that exits with EADDRINUSE is started again on another port, as the Redis fixture does.
        for _ in range(5):
            port = free_port()
            name = f"w{len(started)}-{port}"
            log = tmp_root / f"{name}.log"
            out = open(log, "wb")
            proc = subprocess.Popen(
                [NODE, CONVEYOR, "worker", "--queue", queue, "--handler", handler, "--redis", redis or redis_url,
                 "--port", str(port), "--worker-id", name, "--backoff-base", "100ms", "--backoff-max", "500ms",
                 "--lease", "10s", "--log-level", "info", *args],
                stdout=out, stderr=subprocess.STDOUT, cwd=str(REPO),
                env={**os.environ, "PYTHONPATH": str(PACKAGE), **(env or {})},
            )
            w = Worker(proc, port, log)
            started.append(w)

            def ready(proc: "subprocess.Popen[bytes]" = proc, w: Worker = w, port: int = port) -> bool:
                if proc.poll() is not None:
                    raise AssertionError(f"worker exited {proc.returncode}: {w.logs()}")
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as res:
                    return res.status == 200

            try:
                wait_for(f"worker {name} ready", ready, 60, 0.1)
                return w
            except AssertionError:
                if proc.poll() is None or "EADDRINUSE" not in w.logs():
                    raise
                started.remove(w)
        raise AssertionError("no free port for a worker after 5 tries")

    yield start
    for w in started:
        w.stop()


@pytest.fixture(scope="session")
def cluster_url(tmp_root: Path) -> Iterator[str]:
    """A three-master Redis Cluster on loopback, as redis-cluster://host:port,host:port."""
    procs = []
    for i in range(3):
        d = tmp_root / f"cluster-{i}"
        d.mkdir()
        procs.append(start_redis(d, ["--cluster-enabled", "yes", "--cluster-config-file", str(d / "nodes.conf")]))
    addrs = [f"127.0.0.1:{p.port}" for p in procs]  # type: ignore[attr-defined]
    subprocess.run(["redis-cli", "--cluster", "create", *addrs, "--cluster-replicas", "0", "--cluster-yes"],
                   check=True, capture_output=True, timeout=60)
    for p in procs:
        node_client = redis.Redis(port=p.port, decode_responses=True)  # type: ignore[attr-defined]
        # (redis-py parses CLUSTER INFO into a dict)
        wait_for("cluster ok", lambda: node_client.execute_command("CLUSTER INFO").get("cluster_state") == "ok", 60, 0.2)
    yield "redis-cluster://" + ",".join(addrs)
    for p in procs:
        p.terminate()
        p.wait(10)


class SentinelSet:
    """One primary, one replica and three sentinels (`redis-server --sentinel`) on loopback."""

    MASTER = "conveyor"

    def __init__(self, dir: Path) -> None:
        self.primary = start_redis(dir / "primary")
        self.replica = start_redis(dir / "replica", ["--replicaof", "127.0.0.1", str(self.primary.port)])  # type: ignore[attr-defined]
        self.sentinels: List["subprocess.Popen[bytes]"] = []
        self.sentinel_ports: List[int] = []
        for i in range(3):
            port = free_port()
            conf = dir / f"sentinel-{i}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {dir}\n"
                f"sentinel monitor {self.MASTER} 127.0.0.1 {self.primary.port} 2\n"  # type: ignore[attr-defined]
                f"sentinel down-after-milliseconds {self.MASTER} 1000\n"
                f"sentinel failover-timeout {self.MASTER} 10000\n"
            )
            self.sentinels.append(
                subprocess.Popen(["redis-server", str(conf), "--sentinel", "--daemonize", "no"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
            self.sentinel_ports.append(port)

        def known() -> bool:
            for port in self.sentinel_ports:
                m = redis.Redis(port=port, decode_responses=True).execute_command("SENTINEL", "MASTER", self.MASTER)
                info = m if isinstance(m, dict) else dict(zip(m[::2], m[1::2]))
                if int(info["num-slaves"]) < 1 or int(info["num-other-sentinels"]) < 2:
                    return False
            return True

        wait_for("sentinels to know the replica and each other", known, 60, 0.2)

    @property
    def url(self) -> str:
        return "redis-sentinel://" + ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports) + f"/{self.MASTER}"

    def primary_port(self) -> int:
        host, port = redis.Redis(port=self.sentinel_ports[0]).sentinel_get_master_addr_by_name(self.MASTER)
        return int(port)

    def stop(self) -> None:
        for p in [*self.sentinels, self.primary, self.replica]:
            p.kill()
            p.wait(10)


@pytest.fixture(scope="session")
def sentinel_set(tmp_root: Path) -> Iterator[SentinelSet]:
    d = tmp_root / "sentinel"
    for sub in ("primary", "replica"):
        (d / sub).mkdir(parents=True)
    s = SentinelSet(d)
    yield s
    s.stop()
