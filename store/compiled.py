"""Which of the hot path's modules run compiled, and never a compiled one built from other source.

The install compiles the modules every message passes through (pyproject.toml's
``[tool.primacy] compiled``: the codec in ``broker/``, the record format in ``store/``)
into C extensions beside their ``.py`` files (.ci/build_backend.py). Python would import
such an extension even after its source changed, as it does in an editable install after
``git pull``: old codec bytes beside new code. So ``broker/__init__.py`` and
``store/__init__.py`` install ``FreshCompiledOnly``, which lets an extension be imported
only if it holds the SHA-256 of the source beside it (the build writes it in as
``__source_sha256__``), and otherwise imports the source and logs why.

``PRIMACY_PURE_PYTHON=1`` imports every module from source: the tests run the codec
and record tests that way too (tests/compiled/), and an operator can rule out the
compiled path without reinstalling.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

PURE_PYTHON_VARIABLE = "PRIMACY_PURE_PYTHON"
_PACKAGES = ("primacy.broker", "primacy.store")


def pure_python_wanted() -> bool:
    return os.environ.get(PURE_PYTHON_VARIABLE, "") not in ("", "0")


def is_compiled(module: ModuleType) -> bool:
    return isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader)


def extensions_beside(source: Path) -> list[Path]:
    """The files compiled from ``source``: the module (``frames.cpython-311-...so``) and the
    library mypyc puts its code in (``frames__mypyc.cpython-311-...so``); none if pure."""
    return [
        candidate
        for stem in (source.stem, f"{source.stem}__mypyc")
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
        if (candidate := source.with_name(stem + suffix)).is_file()
    ]


def built_from(extensions: list[Path], source: Path) -> bool:
    """True if the compiled code holds the digest of ``source`` as it is now: positive proof
    that it was compiled from these bytes, not merely that it is newer."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest().encode()
    return any(digest in extension.read_bytes() for extension in extensions)


def stale_in(folders: Sequence[Path]) -> list[Path]:
    """The compiled modules' sources in ``folders`` that changed since their build, or whose
    build is incomplete: without the module's own extension Python imports its source, and
    that module then runs from source beside the others compiled."""
    return [
        source
        for folder in folders
        for source in sorted(folder.glob("*.py"))
        if (extensions := extensions_beside(source))
        and not (_has_own(source, extensions) and built_from(extensions, source))
    ]


def _has_own(source: Path, extensions: list[Path]) -> bool:
    """Whether the extension Python would import for ``source`` is among ``extensions``
    (``frames.cpython-311-...so``, not only the library ``frames__mypyc...``)."""
    return any(extension.name.startswith(f"{source.stem}.") for extension in extensions)


def hot_path_folders(folder: Path) -> list[Path]:
    """``folder`` and the hot path's other package folders beside it (``broker/``, ``store/``):
    their modules are compiled together and call each other's compiled classes."""
    siblings = [folder.parent / package.rpartition(".")[2] for package in _PACKAGES]
    return list(dict.fromkeys([folder, *(s for s in siblings if s.is_dir())]))


class FreshCompiledOnly(importlib.abc.MetaPathFinder):
    """For the hot path's packages: the source where pure Python is wanted, or where any of
    the hot path's extensions is stale; everything else is left to the usual finders.

    All or none: the compiled modules are one build and pass each other their compiled
    classes, which insist on their own type. A source ``Frame`` handed to the compiled
    connection fails at the first frame (``TypeError: ...FrameLimits object expected; got
    ...FrameLimits``), so one stale module puts every one of them on the source."""

    def __init__(self) -> None:
        self._stale: dict[tuple[Path, ...], list[Path]] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package not in _PACKAGES or not path:
            return None
        for folder in path:
            source = Path(folder) / f"{name}.py"
            extensions = extensions_beside(source) if source.is_file() else []
            if not extensions:
                continue
            if pure_python_wanted():
                return importlib.util.spec_from_file_location(fullname, source)
            if self._stale_beside(Path(folder)):
                return importlib.util.spec_from_file_location(fullname, source)
            return None
        return None

    def _stale_beside(self, folder: Path) -> list[Path]:
        """``stale_in`` the hot path's folders, read once per process (each build is read
        whole for its digest)."""
        folders = tuple(sorted(hot_path_folders(folder)))  # one key from broker/ and store/
        if folders not in self._stale:
            self._stale[folders] = stale = stale_in(folders)
            if stale:  # said once: every module of the hot path follows
                log.warning(
                    "compiled from another version of %s (or its own extension is missing): "
                    "running the hot path's source, "
                    "all of it (its compiled modules go together; install primacy again "
                    "to compile them)",
                    ", ".join(str(path) for path in stale),
                )
        return self._stale[folders]


def install() -> None:
    """Put the finder first, once per process."""
    if not any(isinstance(finder, FreshCompiledOnly) for finder in sys.meta_path):
        sys.meta_path.insert(0, FreshCompiledOnly())


def hot_path() -> str:
    """One line for ``primacy --version``: whether the hot path runs compiled."""
    if pure_python_wanted():
        return f"hot path: pure Python ({PURE_PYTHON_VARIABLE} is set)"
    folders = [
        Path(folder)
        for package in _PACKAGES
        for folder in importlib.import_module(package).__path__
    ]
    compiled = [
        source for folder in folders for source in folder.glob("*.py") if extensions_beside(source)
    ]
    if not compiled:
        return "hot path: pure Python (nothing was compiled at install)"
    if stale := stale_in(folders):
        changed = ", ".join(f"{path.parent.name}/{path.name}" for path in stale)
        return (
            f"hot path: pure Python, all {len(compiled)} compiled modules: changed since the "
            f"build (or its extension missing): {changed} (install primacy again to compile them)"
        )
    return f"hot path: compiled ({len(compiled)} modules)"
