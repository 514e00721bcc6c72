"""The file a comparison run writes (``compare_activemq.py --json``) and bench/pictures.py
reads: every sample, and how the run was made (command, commit, Python, cores, load). Its
writer and its reader live here together, so that the format is declared once.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.activemq.figures import Results


def checked_out_commit() -> str:
    """The commit checked out now, marked ``-dirty`` when the tree has changes."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}-dirty" if dirty else head


def write_run(
    path: Path, results: Results, started: str, commit: str, load_at_start: tuple[float, ...]
) -> None:
    """``commit``: the one checked out when the run started (the tree may move on)."""
    document = {
        "started": started,
        "command": " ".join(sys.argv),
        "commit": commit,
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "load_average": {"start": load_at_start[0], "end": os.getloadavg()[0]},
        **results.to_json(),
    }
    path.write_text(json.dumps(document, indent=1) + "\n")


@dataclass(frozen=True)
class Run:
    """What compare_activemq.py --json wrote: the samples and how they were made."""

    results: Results
    started: str
    command: str
    commit: str
    python: str
    cores: int
    load_start: float
    load_end: float

    @classmethod
    def read(cls, path: Path) -> Run:
        document: dict[str, Any] = json.loads(path.read_text())
        load = document["load_average"]
        return cls(
            Results.from_json(document),
            str(document["started"]),
            str(document["command"]),
            str(document["commit"]),
            str(document["python"]),
            int(document["cores"]),
            float(load["start"]),
            float(load["end"]),
        )
