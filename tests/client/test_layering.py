"""The client stands on the STOMP codec alone (DESIGN.md, "Layout").

A client application installs ``primacy.client`` next to its own code; what the
client imports of the broker is the sans-I/O codec (``broker/frames.py``) and
nothing else, so the broker's server side can change without touching clients.
Checked on the source, statically: an import anywhere in ``client/`` (inside a
function too) counts.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODEC = "primacy.broker.frames"


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _imports(path: Path) -> set[str]:
    """The modules of ours ``path`` imports, relative imports resolved (``primacy.client.x``)."""
    package = "primacy." + ".".join(path.relative_to(ROOT).parent.parts)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:
                # ``from primacy.broker import codes`` imports the module primacy.broker.codes.
                submodule = f"{base}.{alias.name}"
                found.add(submodule if _is_module(submodule) else base)
    return {name for name in found if name == "primacy" or name.startswith("primacy.")}


def test_the_client_imports_nothing_of_ours_but_itself_and_the_stomp_codec() -> None:
    sources = sorted((ROOT / "client").rglob("*.py"))
    imported = {str(path.relative_to(ROOT)): _imports(path) for path in sources}
    assert CODEC in set().union(*imported.values())  # the scan sees the imports there are
    outside = {
        path: sorted(
            name
            for name in names
            if name != CODEC and name != "primacy.client" and not name.startswith("primacy.client.")
        )
        for path, names in imported.items()
    }
    assert {path: names for path, names in outside.items() if names} == {}
