"""One registry of message codes: each code declared once, with its meaning, in its layer's module.

The layering forbids one shared module (``store`` and ``nfs_profiles`` import nothing of ours,
``client`` only the STOMP codec), so each layer that emits codes has one code module, listed in
``CODE_MODULES``, and the layers take disjoint number ranges. Together the modules are the
registry; these tests hold them to it: numbers and meanings unique across all of them, every
``PRIMACY-NNNN`` in the source declared and written nowhere but in its module (log calls use
the constants), every declared code used, and the operator guide's table saying the same.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

from tests.packages import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
CODE_MODULES = (
    "supervisor/codes.py",
    "store/messages.py",
    "broker/codes.py",
    "client/errors.py",
    "nfs_profiles/codes.py",
    "cli/codes.py",
)
# Codes older than the ranges keep their numbers, because operators grep for them: the
# journal's "transaction loss averted" (the one analysts look for), the node's rejected
# config file and unusable NOTIFY_SOCKET. No other code may sit outside its module's range.
OUTSIDE_THEIR_RANGE = {
    "PRIMACY-1014": "store/messages.py",
    "PRIMACY-2006": "supervisor/codes.py",
    "PRIMACY-3040": "supervisor/codes.py",
}
CODE = re.compile(r"PRIMACY-\d{4}")
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "systemd" / "README.md"]


@dataclass(frozen=True)
class Declared:
    code: str
    name: str  # the constant
    module: str  # the code module's path, e.g. "supervisor/codes.py"


def _dotted(path: str) -> str:
    return "primacy." + path.removesuffix(".py").replace("/", ".")


def _module(path: str) -> ModuleType:
    return importlib.import_module(_dotted(path))


@cache
def _sources() -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text()
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def _code_constant(node: ast.stmt) -> str | None:
    """The constant's name if ``node`` is a top-level ``NAME = "PRIMACY-NNNN"``."""
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and CODE.fullmatch(node.value.value)
    ):
        return node.targets[0].id
    return None


@cache
def _declared() -> tuple[Declared, ...]:
    found = []
    for path in CODE_MODULES:
        for node in ast.parse(_sources()[path]).body:
            name = _code_constant(node)
            if name is not None:
                assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                found.append(Declared(node.value.value, name, path))
    return tuple(found)


def _declaration_lines(path: str) -> set[int]:
    """Lines of a code module that declare codes: the constants, ``TITLES`` and ``RETIRED``."""
    lines: set[int] = set()
    for node in ast.parse(_sources()[path]).body:
        if _code_constant(node) is not None or (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in ("TITLES", "RETIRED") for t in node.targets)
        ):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _retired() -> dict[str, tuple[str, str]]:
    """Retired code -> (module, why): never used again, still in the guide."""
    return {
        code: (path, why)
        for path in CODE_MODULES
        for code, why in getattr(_module(path), "RETIRED", {}).items()
    }


def _literals(path: str) -> list[tuple[int, str]]:
    return [
        (number, code)
        for number, line in enumerate(_sources()[path].splitlines(), 1)
        for code in CODE.findall(line)
    ]


def _referenced_names(path: str) -> set[tuple[str, str]]:
    """(code module, constant) pairs this file refers to through an import of that module."""
    tree = ast.parse(_sources()[path])
    dotted = {_dotted(p): p for p in CODE_MODULES}
    package = _dotted(path).rsplit(".", 1)[0]
    aliases: dict[str, str] = {}  # local name -> code module, for ``codes.NAME``
    names: dict[str, tuple[str, str]] = {}  # local name -> (code module, constant)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            for alias in node.names:
                local = alias.asname or alias.name
                if base in dotted:
                    names[local] = (dotted[base], alias.name)
                elif f"{base}.{alias.name}" in dotted:
                    aliases[local] = dotted[f"{base}.{alias.name}"]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in dotted and alias.asname:
                    aliases[alias.asname] = dotted[alias.name]
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            found.add((aliases[node.value.id], node.attr))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
            found.add(names[node.id])
    if path in CODE_MODULES:  # the module's own code may use its constants, past the table
        skip = _declaration_lines(path)
        found.update(
            (path, node.id)
            for node in ast.walk(tree)
            if isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.lineno not in skip
        )
    return found


def _guide_table() -> list[tuple[str, str, str]]:
    text = (ROOT / "docs" / "operator-guide.md").read_text()
    section = text[text.index("## Message codes") :]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"^\| `(PRIMACY-\d{4})` \| ([^|]+?) \| (.+?) \|$", section, re.M)


def test_each_code_module_declares_its_layer_range_and_meanings() -> None:
    for path in CODE_MODULES:
        module = _module(path)
        assert isinstance(module.LAYER, str) and module.LAYER, path
        assert isinstance(module.NUMBERS, range), path
        codes = [d.code for d in _declared() if d.module == path]
        assert codes, f"{path} declares no code"
        assert sorted(module.TITLES) == sorted(codes), f"{path}: TITLES and the constants differ"
        assert all(isinstance(m, str) and m.strip() for m in module.TITLES.values()), path


def test_every_code_and_meaning_is_declared_once_across_all_modules() -> None:
    codes = [d.code for d in _declared()] + list(_retired())
    assert sorted(c for c in set(codes) if codes.count(c) > 1) == []
    meanings = [m.lower() for path in CODE_MODULES for m in _module(path).TITLES.values()]
    assert sorted(m for m in set(meanings) if meanings.count(m) > 1) == []


def test_the_layers_number_ranges_are_disjoint() -> None:
    ranges = {path: _module(path).NUMBERS for path in CODE_MODULES}
    for a in CODE_MODULES:
        for b in CODE_MODULES[CODE_MODULES.index(a) + 1 :]:
            overlap = set(ranges[a]) & set(ranges[b])
            assert not overlap, f"{a} and {b} share numbers {min(overlap)}..{max(overlap)}"
    outside = {
        d.code: d.module for d in _declared() if int(d.code[-4:]) not in ranges[d.module]
    } | {code: path for code, (path, _) in _retired().items() if int(code[-4:]) not in ranges[path]}
    assert outside == OUTSIDE_THEIR_RANGE


def test_every_code_in_the_source_is_declared() -> None:
    declared = {d.code for d in _declared()} | set(_retired())
    undeclared = [
        f"{path}:{line}: {code}"
        for path in _sources()
        for line, code in _literals(path)
        if code not in declared
    ]
    assert undeclared == []


def test_no_code_is_written_outside_its_code_module() -> None:
    # Log calls and ERROR frames use the constants, so a code's number is written once.
    inline = [
        f"{path}:{line}: {code}"
        for path in _sources()
        if path not in CODE_MODULES
        for line, code in _literals(path)
    ]
    assert inline == [], "use the code modules' constants:\n" + "\n".join(inline)


def test_every_declared_code_is_used() -> None:
    referenced: set[tuple[str, str]] = set()
    quoted: set[str] = set()
    for path in _sources():
        referenced |= _referenced_names(path)
        skip = _declaration_lines(path) if path in CODE_MODULES else set()
        quoted.update(code for line, code in _literals(path) if line not in skip)
    unused = [
        f"{d.module}: {d.name} ({d.code})"
        for d in _declared()
        if (d.module, d.name) not in referenced and d.code not in quoted
    ]
    assert unused == []
    retired_in_use = sorted(set(_retired()) & quoted)
    assert retired_in_use == []


def test_the_operator_guide_lists_every_code_with_its_layer_and_meaning() -> None:
    rows = _guide_table()
    listed = [code for code, _, _ in rows]
    assert sorted(c for c in set(listed) if listed.count(c) > 1) == [], "listed twice"
    expected = {
        d.code: (_module(d.module).LAYER, _module(d.module).TITLES[d.code]) for d in _declared()
    } | {code: (_module(path).LAYER, f"retired: {why}") for code, (path, why) in _retired().items()}
    table = {code: (layer, meaning) for code, layer, meaning in rows}
    assert sorted(set(expected) - set(table)) == [], "declared but not in the guide's table"
    assert sorted(set(table) - set(expected)) == [], "in the guide's table but not declared"
    differ = [
        f"{code}: guide {table[code]} vs declared {expected[code]}"
        for code in sorted(expected)
        if table[code] != expected[code]
    ]
    assert differ == []
    assert listed == sorted(listed), "keep the table in code order"


def test_docs_and_tests_name_only_declared_codes() -> None:
    declared = {d.code for d in _declared()} | set(_retired())
    files = [*DOCS, *sorted((ROOT / "tests").rglob("*.py"))]
    stale = [
        f"{path.relative_to(ROOT)}: {code}"
        for path in files
        for code in sorted(set(CODE.findall(path.read_text())))
        if code not in declared
    ]
    assert stale == []


def test_the_transaction_loss_code_keeps_its_number() -> None:
    # Analysts grep the journal, the replay's anomalies and old logs for PRIMACY-1014.
    from primacy.store import messages

    assert messages.TRANSACTION_LOSS_AVERTED == "PRIMACY-1014"
    assert messages.TITLES[messages.TRANSACTION_LOSS_AVERTED] == "transaction loss averted"
