"""One code, one meaning: every message code in the source is in the operator guide's table once,
every code there is used, and no code is emitted by two layers."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "locker",
    "store",
    "supervisor",
    "broker",
    "client",
    "api",
    "nfs_profiles",
    "spark",
    "cli",
)
CODE = re.compile(r"PRIMACY-(\d{4})")
# A layer may quote another's codes only to recognise them (the client reads the broker's ERRORs,
# the replay counts the journal's fenced writes); it never logs them as its own.
QUOTES_OTHERS = {"client/producer.py", "spark/replay_tables.py"}


def _guide_table() -> dict[str, list[str]]:
    text = (ROOT / "docs" / "operator-guide.md").read_text()
    section = text[text.index("## Message codes") :]
    section = section[: section.index("\n## ", 1)]
    rows: dict[str, list[str]] = {}
    for code, meaning in re.findall(r"^\| `PRIMACY-(\d{4})` \| [^|]+ \| (.+) \|$", section, re.M):
        rows.setdefault(code, []).append(meaning)
    return rows


def _codes_in_source() -> dict[str, set[str]]:
    """Each code, and the layers (top-level folders) whose source mentions it."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            relative = str(path.relative_to(ROOT))
            if relative in QUOTES_OTHERS:
                continue
            for code in CODE.findall(path.read_text()):
                found.setdefault(code, set()).add(package)
    return found


def test_every_code_in_the_source_is_in_the_guide_once() -> None:
    table = _guide_table()
    missing = sorted(set(_codes_in_source()) - set(table))
    assert missing == [], f"codes used but not in the operator guide's table: {missing}"
    twice = sorted(code for code, meanings in table.items() if len(meanings) > 1)
    assert twice == [], f"codes listed twice: {twice}"


def test_every_code_in_the_guide_is_used_or_retired() -> None:
    used = _codes_in_source()
    unused = [
        code
        for code, meanings in _guide_table().items()
        if code not in used and not meanings[0].startswith("retired")
    ]
    assert unused == []


def test_no_code_is_emitted_by_two_layers() -> None:
    # PRIMACY-1014 once meant "transaction loss averted" in the journal and "applied the
    # edited config" in the node.
    shared = {code: layers for code, layers in _codes_in_source().items() if len(layers) > 1}
    assert shared == {}
