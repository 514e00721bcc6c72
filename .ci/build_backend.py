"""primacy's build backend: setuptools, with the hot path compiled by mypyc where it can be.

pyproject.toml names this backend and lists, under ``[tool.primacy] compiled``, the
modules every message passes through (the STOMP codec, the journal's record format).
They already pass ``mypy --strict``, so mypyc compiles them from the same source into C
extensions, which Python imports in place of the ``.py`` beside them. Where a module
cannot be compiled (no C compiler, no Python headers, a mypyc that refuses it) the
install goes on with every module in pure Python and says so: the same behaviour,
slower (tests/compiled/ pins the two paths to the same bytes). ``PRIMACY_COMPILE=0``
installs pure Python on purpose, as a developer editing those modules may want.

mypyc names a module by its path, and the repository keeps its packages at the top
(``broker/``, not ``primacy/broker/``), so each build lays out a copy of the sources under
``build/mypyc-src/primacy/`` and compiles from there. Each copy gets the SHA-256 of its
source as ``__source_sha256__``, so a compiled module left behind by an older source is
found (tests/compiled/test_fresh.py) rather than silently run in an editable install.
"""

from __future__ import annotations

import configparser
import hashlib
import importlib.machinery
import os
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

import setuptools
from setuptools import build_meta
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parents[1]
_SOURCES = ROOT / "build" / "mypyc-src"
# setuptools runs these only to learn the metadata or the build requirements: nothing to compile.
_METADATA_COMMANDS = {"egg_info", "dist_info", "sdist"}


def compiled_modules() -> list[str]:
    """The repository paths pyproject.toml lists as compiled (``broker/frames.py``, ...)."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        return list(tomllib.load(file)["tool"]["primacy"]["compiled"])


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _say(message: str) -> None:
    print(f"primacy build: {message}", file=sys.stderr, flush=True)


def _package_dirs() -> list[tuple[str, str]]:
    """setup.cfg's packages and the repository folders they install from
    (``primacy.broker``, ``broker``), ..."""
    setup_cfg = configparser.ConfigParser()
    setup_cfg.read(ROOT / "setup.cfg")
    lines = setup_cfg["options"]["package_dir"].strip().splitlines()
    return [(line.partition("=")[0].strip(), line.partition("=")[2].strip()) for line in lines]


def _lay_out_sources() -> list[str]:
    """Copy every package under build/mypyc-src/primacy/ (mypyc type-checks the imports
    too), the compiled ones with their digest appended; their paths there, to compile."""
    shutil.rmtree(_SOURCES, ignore_errors=True)
    for package, folder in _package_dirs():
        shutil.copytree(
            ROOT / folder,
            _SOURCES.joinpath(*package.split(".")),
            ignore=shutil.ignore_patterns("*.so", "__pycache__"),
        )
    targets = []
    for module in compiled_modules():
        copy = _SOURCES / "primacy" / module
        digest = source_digest(ROOT / module)
        with open(copy, "a") as file:  # at the end, so the line numbers stay the source's
            file.write(f"\n__source_sha256__ = {digest!r}\n")
        targets.append(str(copy.relative_to(ROOT)))
    return targets


def _mypyc_extensions() -> list[Any]:
    if os.environ.get("PRIMACY_COMPILE", "1") == "0":
        _say("PRIMACY_COMPILE=0: every module in pure Python")
        return []
    try:
        from mypyc.build import mypycify

        targets = _lay_out_sources()
        os.environ["MYPYPATH"] = str(_SOURCES)
        return list(
            mypycify(
                ["--explicit-package-bases", *targets],
                opt_level="3",
                # One extension per module, inside its package: no shared library at the top.
                separate=True,
                target_dir=str(ROOT / "build" / "mypyc"),
            )
        )
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error
        _say(f"mypyc could not compile the hot path ({exc!r}): every module in pure Python")
        return []


class _AllOrNothingBuildExt(build_ext):
    """Build every compiled module or none: a module's extension needs its runtime library
    beside it, so a half-built set would fail at import. On any failure, pure Python."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.parallel = os.cpu_count() or 1  # sixteen C files: one compiler per core

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # setuptools' CompileError, LinkError, a missing Python.h
            for output in self.get_outputs():
                Path(output).unlink(missing_ok=True)
            for extension in self.extensions:
                inplace = Path(self.get_ext_fullpath(extension.name))
                inplace.unlink(missing_ok=True)
            _say(f"the C build failed ({exc}): every module in pure Python")
            self.extensions = []
            self.distribution.ext_modules = []


def _remove_extensions_not_built(compiled: list[str]) -> None:
    """An editable install imports the extensions beside the sources: remove those of every
    module this build leaves in pure Python (all of them with ``PRIMACY_COMPILE=0`` or when
    mypyc refuses, a module taken off the list), or an earlier build's keep running where the
    build said pure Python (and, stale once its source changes, put the whole hot path on the
    source for good: installing again would not remove them)."""
    keep = {ROOT / module for module in compiled}
    for _, folder in _package_dirs():
        for source in sorted((ROOT / folder).glob("*.py")):
            if source in keep:
                continue
            # The names store/compiled.py's extensions_beside looks for; not imported from
            # there: the build runs before primacy is importable.
            for stem in (source.stem, f"{source.stem}__mypyc"):
                for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                    extension = source.with_name(stem + suffix)
                    if extension.is_file():
                        extension.unlink()
                        _say(f"removed {extension.relative_to(ROOT)}: not compiled by this build")


class _Backend(build_meta._BuildMetaBackend):
    """setuptools' backend with ``setup()`` given the mypyc extensions (there is no setup.py)."""

    def run_setup(self, setup_script: str = "setup.py") -> None:
        metadata_only = _METADATA_COMMANDS.intersection(sys.argv[1:])
        extensions = [] if metadata_only else _mypyc_extensions()
        if "editable_wheel" in sys.argv[1:]:  # the only build that puts extensions in place
            _remove_extensions_not_built(compiled_modules() if extensions else [])
        setuptools.setup(ext_modules=extensions, cmdclass={"build_ext": _AllOrNothingBuildExt})


_backend = _Backend()
get_requires_for_build_wheel = _backend.get_requires_for_build_wheel
get_requires_for_build_sdist = _backend.get_requires_for_build_sdist
get_requires_for_build_editable = _backend.get_requires_for_build_editable
prepare_metadata_for_build_wheel = _backend.prepare_metadata_for_build_wheel
prepare_metadata_for_build_editable = _backend.prepare_metadata_for_build_editable
build_wheel = _backend.build_wheel
build_sdist = _backend.build_sdist
build_editable = _backend.build_editable
