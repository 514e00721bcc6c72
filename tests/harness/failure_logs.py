"""The logs a failed test's processes left, attached to its report.

A test of real processes that fails in CI says only what it waited for ("n3 answers /health");
why (the node exited, refused its share, never bound its port) is in the node's log under the
test's ``tmp_path``, which is gone with the CI machine. So the tail of every log there is
added to the failure's report, which CI prints.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# Enough for a node's start and its last role changes; a few files at most (CI's output is read
# by people, and a group's logs are what matters, not a broker's every line).
TAIL_CHARS = 3000
MOST_FILES = 6


def log_tails(directory: Path) -> list[tuple[str, str]]:
    """(title, tail) of the most recently written non-empty ``*.log`` files below
    ``directory``, newest first."""
    found = []
    for path in directory.rglob("*.log"):
        try:
            stat = path.stat()
        except OSError:
            continue  # removed meanwhile
        if path.is_file() and stat.st_size > 0:
            found.append((stat.st_mtime, stat.st_size, path))
    found.sort(reverse=True)
    tails = []
    for _, size, path in found[:MOST_FILES]:
        try:
            with path.open("rb") as log:
                log.seek(max(0, size - TAIL_CHARS))
                tail = log.read().decode(errors="replace")
        except OSError as exc:
            tail = f"(unreadable: {exc})"
        tails.append((f"log {path.relative_to(directory)} (its end)", tail))
    return tails


def attach_log_tails(item: pytest.Item, report: pytest.TestReport) -> None:
    """Add the tails of the logs below the test's ``tmp_path`` to ``report`` if it failed."""
    tmp_path = getattr(item, "funcargs", {}).get("tmp_path")
    if report.failed and isinstance(tmp_path, Path) and tmp_path.is_dir():
        for title, tail in log_tails(tmp_path):
            report.sections.append((title, tail))
