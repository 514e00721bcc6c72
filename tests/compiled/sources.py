"""The hot path's modules as this install imports them, and as pure Python from the same source.

pyproject.toml's ``[tool.primacy] compiled`` lists them; ``source_module`` executes a
module's ``.py`` under another name, so the compiled and the pure version of one source
can run side by side in one process and be compared.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

from primacy.store.compiled import is_compiled

ROOT = Path(__file__).resolve().parents[2]


def compiled_paths() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return list(tomllib.load(file)["tool"]["primacy"]["compiled"])


def module_name(path: str) -> str:
    """``broker/frames.py`` -> ``primacy.broker.frames``."""
    return "primacy." + path.removesuffix(".py").replace("/", ".")


def installed_module(path: str) -> ModuleType:
    return importlib.import_module(module_name(path))


def source_module(path: str) -> ModuleType:
    """The module run from its ``.py``, whatever this install compiled."""
    name = "pure_" + module_name(path).replace(".", "_")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def compiled_and_source(path: str) -> tuple[ModuleType, ModuleType]:
    """Both versions; skips where this install runs the module from source (then there is
    one path only, and tests/compiled/test_fresh.py says whether that is allowed here)."""
    compiled = installed_module(path)
    if not is_compiled(compiled):
        pytest.skip(f"{path} is not compiled in this install (see test_fresh.py)")
    return compiled, source_module(path)
