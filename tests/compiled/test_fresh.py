"""The install compiles the hot path where it can, never runs a stale build, and has a pure path.

- Where a C compiler and Python's headers are present (CI's machine), every module
  pyproject.toml lists is compiled: a build that fell back to pure Python without a
  word would leave the parity tests comparing the source with itself.
- A compiled module whose source changed since (an editable install after ``git pull``)
  is not imported: its source is, with a warning (store/compiled.py).
- ``PRIMACY_PURE_PYTHON=1`` runs the source, and the codec's and the records' own tests
  pass that way too: CI runs both paths.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from primacy.store.compiled import PURE_PYTHON_VARIABLE, FreshCompiledOnly, extensions_beside
from tests.compiled.sources import ROOT, compiled_paths, installed_module, module_name

# The tests of what the compiled modules do, run again on the source.
ON_BOTH_PATHS = [
    "tests/broker/test_frames.py",
    "tests/broker/test_frames_property.py",
    "tests/store/test_format.py",
    "tests/store/test_crafted_batches.py",
    "tests/store/test_checkpoint_columns.py",
    "tests/store/test_checkpoint_property.py",
    "tests/store/test_dedupe_window.py",
    # The broker core, the connection and its commands under real traffic (stomp.py)
    "tests/broker/test_event_loops.py",
    "tests/broker/test_stomp10_subscriptions.py",
    "tests/store/test_inline_commit.py",  # the journal writer's commit order, on both threads
]
# ... but for the 200 000-case fuzz: on the source it cost 60-80 s of the test command's CPU
# for the one generator whose 20 000 cases (test_short_fuzz_run_of_mangled_frames, fixed seed)
# run there too. The 200 000 run on the build of the same source, and the compiled-against-
# source parity tests (tests/compiled), cover the rest.
LONG_FUZZ = "tests/broker/test_frames_property.py::test_fuzz_run_of_two_hundred_thousand_frames"


def _can_compile() -> str | None:
    """Why this machine cannot compile, or None."""
    if os.environ.get("PRIMACY_COMPILE") == "0":
        return "installed with PRIMACY_COMPILE=0"
    if os.environ.get(PURE_PYTHON_VARIABLE, "") not in ("", "0"):
        return f"{PURE_PYTHON_VARIABLE} is set"
    if shutil.which(sysconfig.get_config_var("CC").split()[0] or "cc") is None:
        return "no C compiler"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python headers (Debian: python3-dev)"
    return None


def test_every_listed_module_is_compiled_where_a_compiler_is() -> None:
    reason = _can_compile()
    if reason:
        pytest.skip(f"pure Python expected here: {reason}")
    running = {path: installed_module(path).__file__ for path in compiled_paths()}
    assert {p: f for p, f in running.items() if f is None or f.endswith(".py")} == {}, (
        "a C compiler and Python's headers are here but these run from source: "
        "install again (`bash .ci/setup dev`) and read its 'primacy build:' lines"
    )


@pytest.fixture
def copied_frames(tmp_path: Path) -> Path:
    """broker/frames.py and its compiled files, copied to a folder of their own."""
    source = ROOT / "broker" / "frames.py"
    extensions = extensions_beside(source)
    if not extensions:
        pytest.skip("broker/frames.py is not compiled in this install")
    for path in [source, *extensions]:
        shutil.copy2(path, tmp_path / path.name)
    return tmp_path / "frames.py"


def test_a_build_of_this_source_is_imported(
    copied_frames: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PURE_PYTHON_VARIABLE, raising=False)  # the suite may run pure
    assert (
        FreshCompiledOnly().find_spec(module_name("broker/frames.py"), [str(copied_frames.parent)])
        is None
    )


def test_a_build_of_another_source_is_not(
    copied_frames: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PURE_PYTHON_VARIABLE, raising=False)
    with copied_frames.open("a") as file:
        file.write("# changed after the build\n")
    with caplog.at_level(logging.WARNING):
        spec = FreshCompiledOnly().find_spec(
            module_name("broker/frames.py"), [str(copied_frames.parent)]
        )
    assert spec is not None and spec.origin == str(copied_frames)
    assert "compiled from another version of" in caplog.text


@pytest.fixture
def copied_hot_path(tmp_path: Path) -> Path:
    """broker/frames.py and store/format.py with their compiled files, in broker/ and store/
    folders side by side, as an install lays them out; the broker folder."""
    for module in ("broker/frames.py", "store/format.py"):
        source = ROOT / module
        extensions = extensions_beside(source)
        if not extensions:
            pytest.skip(f"{module} is not compiled in this install")
        folder = tmp_path / source.parent.name
        folder.mkdir(exist_ok=True)
        for path in [source, *extensions]:
            shutil.copy2(path, folder / path.name)
    return tmp_path / "broker"


def test_one_stale_module_puts_every_compiled_one_on_the_source(
    copied_hot_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled modules pass each other their compiled classes: a compiled frames module
    beside a source one (or the other way round) fails at the first frame with 'FrameLimits
    object expected; got FrameLimits' and stops the node. So a change to any of them, not
    just to the module imported, runs all of them from source, and says which changed."""
    monkeypatch.delenv(PURE_PYTHON_VARIABLE, raising=False)
    frames = module_name("broker/frames.py")
    assert FreshCompiledOnly().find_spec(frames, [str(copied_hot_path)]) is None  # all fresh
    with (copied_hot_path.parent / "store" / "format.py").open("a") as file:
        file.write("# changed after the build\n")
    with caplog.at_level(logging.WARNING):
        spec = FreshCompiledOnly().find_spec(frames, [str(copied_hot_path)])
    assert spec is not None and spec.origin == str(copied_hot_path / "frames.py")
    assert "compiled from another version of" in caplog.text
    assert str(copied_hot_path.parent / "store" / "format.py") in caplog.text


def test_a_module_whose_own_extension_is_gone_puts_every_compiled_one_on_the_source(
    copied_hot_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its library (``format__mypyc``) still there and fresh, but the module's extension gone
    (a partial copy, a cleanup too eager): Python would import that module's source beside
    the others compiled, the mix that stops the node at its first frame."""
    monkeypatch.delenv(PURE_PYTHON_VARIABLE, raising=False)
    store = copied_hot_path.parent / "store"
    (own,) = [path for path in extensions_beside(store / "format.py") if "__mypyc" not in path.name]
    own.unlink()
    with caplog.at_level(logging.WARNING):
        spec = FreshCompiledOnly().find_spec(
            module_name("broker/frames.py"), [str(copied_hot_path)]
        )
    assert spec is not None and spec.origin == str(copied_hot_path / "frames.py")
    assert str(store / "format.py") in caplog.text


def test_pure_python_is_chosen_by_the_environment(
    copied_frames: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    spec = FreshCompiledOnly().find_spec(
        module_name("broker/frames.py"), [str(copied_frames.parent)]
    )
    assert spec is not None and spec.origin == str(copied_frames)


def _pure_env() -> dict[str, str]:
    return {**os.environ, PURE_PYTHON_VARIABLE: "1"}


@pytest.mark.slow
def test_the_codec_and_record_tests_pass_on_the_source() -> None:
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import "
            + ", ".join(map(module_name, compiled_paths()))
            + "; import sys; print('\\n'.join(sys.modules[m].__file__ for m in "
            + repr([module_name(p) for p in compiled_paths()])
            + "))",
        ],
        env=_pure_env(),
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.split()
    assert [path for path in loaded if not path.endswith(".py")] == []
    pytest_args = ["-q", "-n", "0", "-p", "no:cacheprovider", "--deselect", LONG_FUZZ]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_args, *ON_BOTH_PATHS],
        env=_pure_env(),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1]
    assert "1 deselected" in run.stdout.splitlines()[-1]  # the long fuzz, by its name


def test_version_says_which_path_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PURE_PYTHON_VARIABLE, raising=False)  # `said` runs without it
    primacy = str(Path(sys.executable).parent / "primacy")
    env = dict(os.environ)
    said = subprocess.run([primacy, "--version"], env=env, capture_output=True, text=True)
    pure = subprocess.run([primacy, "--version"], env=_pure_env(), capture_output=True, text=True)
    assert pure.stdout.splitlines()[1] == f"hot path: pure Python ({PURE_PYTHON_VARIABLE} is set)"
    if _can_compile() is None:
        modules = len(compiled_paths())
        assert said.stdout.splitlines()[1] == f"hot path: compiled ({modules} modules)"
    else:
        assert said.stdout.splitlines()[1].startswith("hot path: pure Python")
