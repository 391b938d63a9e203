"""`pip install ./clients/python` works offline (--no-build-isolation, setuptools from Debian),
its build writes the resolved scripts into the package (setup.py), and so does its sdist: the
installed package carries the scripts and py.typed and runs without a checkout."""

import shutil
import subprocess
from pathlib import Path
from typing import List

from conftest import PACKAGE, PYTHON, REPO


def run(args: List[str], cwd: Path) -> None:
    out = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=str(cwd))
    assert out.returncode == 0, out.stderr


def pip_install(source: str, target: Path, cwd: Path) -> None:
    run([PYTHON, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "--no-index",
         "--target", str(target), source], cwd)


def assert_runs_without_checkout(installed: Path, cwd: Path) -> None:
    assert (installed / "conveyor" / "py.typed").exists()
    from conveyor import _scripts

    names = _scripts.script_names(REPO / "queue" / "scripts")
    assert sorted(p.stem for p in (installed / "conveyor" / "scripts").glob("*.lua")) == names
    for name in names:
        assert (installed / "conveyor" / "scripts" / f"{name}.lua").read_text() == _scripts.script_source(name)
    probe = ("import conveyor, conveyor.handler; from conveyor import _scripts; from conveyor.client import _Script; "
             "assert _scripts.CHECKOUT_SCRIPTS is None; print(len(_Script('enqueue_jobs').source))")
    out = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, cwd=str(cwd),
                         env={"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and int(out.stdout) > 1000, out.stderr


def test_pip_installs_offline_with_package_data(tmp_path: Path) -> None:
    # a copy of what the build reads (it writes build/ and *.egg-info next to the sources)
    checkout = tmp_path / "checkout"
    source = checkout / "clients" / "python"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("tests", "build", "scripts", "*.egg-info",
                                                                   "__pycache__"))
    shutil.copytree(REPO / "queue" / "scripts", checkout / "queue" / "scripts")
    shutil.copy(REPO / "queue" / "scripts.ts", checkout / "queue" / "scripts.ts")

    pip_install(str(source), tmp_path / "site", tmp_path)
    assert_runs_without_checkout(tmp_path / "site", tmp_path)

    # the sdist carries the resolved scripts: a wheel built from it (no checkout around) has them
    run([PYTHON, "setup.py", "-q", "sdist", "--dist-dir", str(tmp_path / "dist")], source)
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    pip_install(str(sdist), tmp_path / "site-sdist", tmp_path)
    assert_runs_without_checkout(tmp_path / "site-sdist", tmp_path)
