"""A wheelhouse without the network: primacy's wheel built from the tree, its dependencies
repacked as wheels from what this environment has installed.

What the operator guide's offline route carries to a host (a folder of wheels that
``pip install --no-index --find-links`` installs from), made here from the test's own
virtualenv instead of ``pip wheel`` on a connected machine, so the test needs no index.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
NOT_SOURCE = shutil.ignore_patterns(
    *(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.so", "node_modules"),
    *(".*cache", ".hypothesis"),
)
# pip writes these at install; a wheel carries none of them (RECORD is written anew).
_INSTALL_RECORDS = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


def build_primacy_wheel(
    out: Path, work: Path, *, verbose: bool = False, **env: str
) -> tuple[Path, str]:
    """``pip wheel`` of a copy of the tree (pip's own build of it, as a sysadmin's), into out;
    the wheel and what the build printed (all of it with ``verbose``)."""
    tree = work / "tree"
    shutil.copytree(ROOT, tree, ignore=NOT_SOURCE)
    verbosity = "-v" if verbose else "--quiet"
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", verbosity, "-w", str(out), str(tree)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (wheel,) = out.glob("primacy-*.whl")
    return wheel, run.stdout + run.stderr


def dependencies(name: str = "primacy") -> list[importlib.metadata.Distribution]:
    """The installed distributions ``name`` needs without extras, transitively."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = [name]
    while todo:
        for line in importlib.metadata.distribution(todo.pop()).requires or []:
            requirement = Requirement(line)
            if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
                continue
            key = canonicalize_name(requirement.name)
            if key not in seen:
                seen[key] = importlib.metadata.distribution(requirement.name)
                todo.append(requirement.name)
    return list(seen.values())


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def _files(dist: importlib.metadata.Distribution) -> Iterator[tuple[str, Path]]:
    """The installed files a wheel of ``dist`` holds: its place in the wheel, its path."""
    for file in dist.files or []:
        parts = file.parts
        if parts[0] == ".." or "__pycache__" in parts:  # scripts (pip makes them anew), bytecode
            continue
        if parts[0].endswith(".dist-info") and len(parts) == 2 and parts[1] in _INSTALL_RECORDS:
            continue
        yield "/".join(parts), Path(str(file.locate()))


def repack(dist: importlib.metadata.Distribution, out: Path) -> Path:
    """A wheel of the installed ``dist``, with the tags its install recorded in WHEEL."""
    files = list(_files(dist))
    (dist_info,) = {name.split("/")[0] for name, _ in files if name.endswith(".dist-info/WHEEL")}
    tags = [
        line.split(":", 1)[1].strip()
        for line in (dist.read_text("WHEEL") or "").splitlines()
        if line.startswith("Tag:")
    ]
    python, abi, platform = ({tag.split("-")[i] for tag in tags} for i in range(3))
    tag = "-".join(".".join(sorted(part)) for part in (python, abi, platform))
    wheel = out / f"{dist_info.removesuffix('.dist-info')}-{tag}.whl"
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        for name, path in files:
            data = path.read_bytes()
            archive.writestr(name, data)
            record.append(f"{name},{_record_hash(data)},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel


def offline_wheelhouse(out: Path, work: Path, **env: str) -> Path:
    """primacy's wheel and one for each of its dependencies, in ``out``: what a host without
    the network installs from."""
    out.mkdir(parents=True, exist_ok=True)
    build_primacy_wheel(out, work, **env)
    for dist in dependencies():
        repack(dist, out)
    return out
