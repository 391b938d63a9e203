"""`pip install ./clients/python` works offline (--no-build-isolation, setuptools from Debian)
and the installed package carries its scripts and py.typed."""

import shutil
import subprocess
from pathlib import Path

from conftest import PACKAGE, PYTHON


def test_pip_installs_offline_with_package_data(tmp_path: Path) -> None:
    source = tmp_path / "src"  # a copy: the build writes build/ and *.egg-info next to the sources
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    out = subprocess.run(
        [PYTHON, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "--no-index",
         "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    installed = target / "conveyor"
    assert (installed / "py.typed").exists()
    for lua in (PACKAGE / "conveyor" / "scripts").glob("*.lua"):
        assert (installed / "scripts" / lua.name).read_text() == lua.read_text()
    probe = "import conveyor, conveyor.handler; from conveyor.client import _Script; print(len(_Script('enqueue_jobs').source))"
    run = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, cwd=str(tmp_path),
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0 and int(run.stdout) > 1000, run.stderr
