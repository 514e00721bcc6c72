"""Every test the docs cite as evidence exists (a renamed test must not leave a dangling claim)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "systemd" / "README.md"]


def _tests_in_tree() -> tuple[set[str], set[str]]:
    files = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("*.py")}
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        names.update(re.findall(r"^def (test_\w+)", path.read_text(), re.M))
    return files, names


def test_every_cited_test_file_and_test_exists() -> None:
    files, names = _tests_in_tree()
    dangling = []
    for doc in DOCS:
        text = doc.read_text()
        for file, test in re.findall(r"(tests/[\w/]+\.py)(?:::(\w+))?", text):
            if file not in files or (test and test not in names):
                dangling.append(f"{doc.name}: {file}::{test}")
        dangling += [
            f"{doc.name}: {t}" for t in re.findall(r"`(test_\w+)`", text) if t not in names
        ]
    assert dangling == []
