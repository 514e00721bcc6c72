"""Nothing outside the share layer spells a path on the share (issue 26): every package and
bench/ takes the journal, epochs, nodes, lock file and markers from primacy.share.layout.

A name like "journal" is also a CLI subcommand, a Spark format and a JSON key; what this
looks for is the name used as a path: joined with ``/``, ``os.path.join`` or ``Path(...)``,
or inside a string next to a slash.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from primacy.share import layout
from tests.packages import PACKAGES, ROOT

SHARE_NAMES = {
    layout.LOCK_FILE_NAME,
    layout.EPOCHS_DIR_NAME,
    layout.NODES_DIR_NAME,
    layout.JOURNAL_DIR_NAME,
    layout.CHECKPOINTS_DIR_NAME,
    layout.QUARANTINE_DIR_NAME,
    layout.PAUSED_FILE_NAME,
    layout.SWITCHOVER_FILE_NAME,
}
OWNER = "share"


def _has_share_path(text: str) -> bool:
    """A share name beside a slash: ``journal/checkpoints``, ``/nodes/``."""
    return "/" in text and any(part in SHARE_NAMES for part in text.split("/"))


def _share_name(node: ast.AST) -> str | None:
    text = node.value if isinstance(node, ast.Constant) else None
    if isinstance(text, str) and (text in SHARE_NAMES or _has_share_path(text)):
        return text
    return None


def _path_spellings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            for side in (node.left, node.right):
                if name := _share_name(side):
                    yield node.lineno, f'/ "{name}"'
        elif isinstance(node, ast.Call):
            callee = ast.unparse(node.func)
            if callee in ("os.path.join", "Path", "pathlib.Path", "PurePath"):
                for argument in node.args:
                    if name := _share_name(argument):
                        yield node.lineno, f'{callee}(..."{name}")'
        elif isinstance(node, ast.JoinedStr):
            for value in node.values:
                if isinstance(value, ast.Constant) and _has_share_path(str(value.value)):
                    yield node.lineno, f'f"...{value.value}..."'


def _checked_files() -> list[Path]:
    folders = [folder for folder in PACKAGES if folder != OWNER] + ["bench"]
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def test_no_package_or_benchmark_spells_a_share_path() -> None:
    offending = [
        f"{path.relative_to(ROOT)}:{line}: {spelling}"
        for path in _checked_files()
        for line, spelling in _path_spellings(ast.parse(path.read_text(), str(path)))
    ]
    assert offending == []


def test_the_check_finds_each_way_of_spelling_one() -> None:
    # The check above must be able to fail: each form it looks for, found.
    source = (
        'a = share / "journal"\n'
        'b = os.path.join(share, "epochs")\n'
        'c = Path(share, "primacy.lock")\n'
        'd = f"{share}/nodes/{node}.json"\n'
        'e = share / "journal/checkpoints"\n'
        'f = parser.add_parser("journal")\n'  # a subcommand, not a path
    )
    found = [line for line, _ in _path_spellings(ast.parse(source))]
    assert found == [1, 2, 3, 4, 5]
