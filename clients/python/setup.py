"""Puts the published Lua scripts into the built package: resolved from the repository's
queue/scripts (conveyor/_scripts.py, as the client resolves them in a checkout) into the wheel's
conveyor/scripts/ and the sdist's (a wheel built from that sdist takes them as package data).
Everything else is in pyproject.toml."""

import importlib.util
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_conveyor_scripts", HERE / "conveyor" / "_scripts.py")
assert _spec is not None and _spec.loader is not None
scripts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scripts)


def _write_scripts(package_dir: Path) -> None:
    target = package_dir / "conveyor" / "scripts"
    if scripts.CHECKOUT_SCRIPTS is None:
        if not any(target.glob("*.lua")):  # neither a checkout nor an sdist that carries them
            raise SystemExit(f"conveyor: no Lua scripts: build from a Conveyor checkout or its sdist ({target})")
        return
    shutil.rmtree(target, ignore_errors=True)  # no script the repository no longer has
    scripts.write_scripts(scripts.CHECKOUT_SCRIPTS, target)


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        _write_scripts(Path(self.build_lib))


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list) -> None:
        super().make_release_tree(base_dir, files)
        _write_scripts(Path(base_dir))


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
