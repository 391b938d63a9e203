"""The published Lua scripts. Run from a checkout, the client resolves the repository's
queue/scripts itself, exactly as queue/scripts.ts does (tests/test_protocol.py compares every
script with `conveyor scripts dump`); a built package carries them resolved as package data
(setup.py writes them there). Standard library only: setup.py loads this file on its own."""

import os
import re
from importlib.resources import files
from pathlib import Path
from typing import List, Optional, Set

# `--- @include "path"` (BullMQ's form): a helper file, relative to the including file, `.lua` implied.
_INCLUDE = re.compile(r'--- @include "([^"]+)"[ \t]*')


def _checkout_scripts() -> Optional[Path]:
    """queue/scripts of the repository this file sits in (clients/python/conveyor/), if it does."""
    parents = Path(__file__).resolve().parents
    if len(parents) < 4 or parents[2].name != "clients":
        return None
    scripts = parents[3] / "queue" / "scripts"
    return scripts if (parents[3] / "queue" / "scripts.ts").is_file() and scripts.is_dir() else None


CHECKOUT_SCRIPTS = _checkout_scripts()


def resolve_includes(path: Path) -> str:
    """The script at `path` with its includes resolved: each include is replaced, depth first, by
    the helper's own resolved text the first time any file of the script names it, and dropped
    after that (queue/scripts.ts resolveIncludes, line for line, so both give the same SHA)."""
    seen: Set[str] = set()

    def resolve(text: str, at: str, chain: List[str]) -> str:
        lines: List[str] = []
        for line in text.split("\n"):
            m = _INCLUDE.fullmatch(line)
            if not m:
                lines.append(line)
                continue
            target = os.path.normpath(os.path.join(os.path.dirname(at), m.group(1) + ".lua"))
            if target in chain:
                raise ValueError("Lua include cycle: " + " → ".join(chain + [target]))
            if target in seen:
                continue
            seen.add(target)
            helper = Path(target).read_text(encoding="utf-8").rstrip("\n")
            lines.append(resolve(helper, target, chain + [target]))
        return "\n".join(lines)

    return resolve(path.read_text(encoding="utf-8"), str(path), [])


def script_names(scripts_dir: Path) -> List[str]:
    """Every published script of a queue/scripts folder (its includes/ are helpers, not scripts)."""
    return sorted(p.stem for p in scripts_dir.glob("*.lua"))


def write_scripts(scripts_dir: Path, target: Path) -> List[Path]:
    """Writes every script of `scripts_dir`, resolved, to `target` as <name>.lua (the package build)."""
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name in script_names(scripts_dir):
        out = target / f"{name}.lua"
        out.write_text(resolve_includes(scripts_dir / f"{name}.lua"), encoding="utf-8")
        written.append(out)
    return written


def script_source(name: str) -> str:
    """The resolved text of a published script: the checkout's, else the package's copy."""
    if CHECKOUT_SCRIPTS is not None:
        return resolve_includes(CHECKOUT_SCRIPTS / f"{name}.lua")
    packaged = files("conveyor") / "scripts" / f"{name}.lua"
    if not packaged.is_file():
        raise FileNotFoundError(
            f"conveyor: the Lua script {name!r} is not in this package (conveyor/scripts/): install the "
            "client with pip (its build writes the scripts there) or run it from a Conveyor checkout"
        )
    return packaged.read_text(encoding="utf-8")
