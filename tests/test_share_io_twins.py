"""The lock layer and the store each carry the share's file helpers (they import nothing of
each other); the two copies must stay the same code."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _code(path: Path) -> str:
    """The module's code without its docstring."""
    tree = ast.parse(path.read_text())
    body = tree.body[1:] if isinstance(tree.body[0], ast.Expr) else tree.body
    return "\n".join(ast.unparse(node) for node in body)


def test_the_lock_layers_and_the_stores_share_io_are_the_same_code() -> None:
    assert _code(ROOT / "locker" / "share_io.py") == _code(ROOT / "store" / "share_io.py")
