"""The harness boundary: bench/ uses tests/harness only, nothing imports a conftest, and no
file under tests/ grows past what one reader holds (issue 26)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 450


def _python_files(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "node_modules" not in p.parts)


def _imported_modules(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, by its absolute name; ``from a import b`` yields ``a``
    and ``a.b`` (b may be a module)."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_bench_imports_nothing_of_tests_but_the_harness() -> None:
    offending = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in _python_files("bench")
        for module in _imported_modules(path)
        if _within(module, "tests")
        and not _within(module, "tests.harness")
        # ``from tests import harness`` names the harness too
        and module != "tests"
    ]
    assert offending == []


def test_the_harness_imports_nothing_of_tests_outside_it() -> None:
    offending = [
        f"{path.relative_to(ROOT)}: {module}"
        for path in _python_files("tests/harness")
        for module in _imported_modules(path)
        if _within(module, "tests") and not _within(module, "tests.harness") and module != "tests"
    ]
    assert offending == []


def test_the_harness_holds_no_test_module_and_no_conftest() -> None:
    found = [
        str(path.relative_to(ROOT))
        for path in _python_files("tests/harness")
        if path.name.startswith("test_") or path.name == "conftest.py"
    ]
    assert found == []


def test_no_file_imports_a_conftest() -> None:
    # pytest loads each conftest itself; importing one runs it a second time as another module.
    offending = [
        f"{path.relative_to(ROOT)}: {module}"
        for folder in ("tests", "bench")
        for path in _python_files(folder)
        for module in _imported_modules(path)
        if module.rsplit(".", 1)[-1] == "conftest"
    ]
    assert offending == []


def test_no_file_under_tests_is_over_450_lines() -> None:
    too_long = {
        str(path.relative_to(ROOT)): lines
        for path in _python_files("tests")
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert too_long == {}
